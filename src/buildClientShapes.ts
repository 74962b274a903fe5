/**
 * `npm run build`, first step: writes src/client/detailsShapes.ts from the kinds' details schemas
 * (src/clientShapesSource.ts), formatted as the rest of the code, before either package compiles.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CLIENT_SHAPES_FILE, clientShapesSource } from './clientShapesSource.js';
import type { AnyKind } from './core/kind.js';
import { KINDS } from './core/kinds.js';

const SRC = fileURLToPath(new URL('.', import.meta.url));

/** Where each exported interface or type of src/core is declared, relative to src/. */
export function coreTypeModules(src = SRC): Record<string, string> {
  const modules: Record<string, string> = {};
  const core = join(src, 'core');
  for (const file of readdirSync(core, { recursive: true, encoding: 'utf8' })) {
    if (!file.endsWith('.ts')) continue;
    const text = readFileSync(join(core, file), 'utf8');
    for (const m of text.matchAll(/^export (?:interface|type) ([A-Za-z0-9]+)/gm))
      modules[m[1]!] = relative(src, join(core, file)).replaceAll('\\', '/');
  }
  return modules;
}

/** The generated module's text, as prettier writes it (prettier is a build-time dependency). */
export async function formattedClientShapes(src = SRC): Promise<string> {
  const prettier = await import('prettier');
  const path = join(src, '..', CLIENT_SHAPES_FILE);
  const options = await prettier.resolveConfig(path);
  return prettier.format(clientShapesSource(KINDS as readonly AnyKind[], coreTypeModules(src)), {
    ...options,
    filepath: path,
  });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const path = join(SRC, '..', CLIENT_SHAPES_FILE);
  writeFileSync(path, await formattedClientShapes());
  process.stdout.write(`client shapes: ${relative(process.cwd(), path)}\n`);
}
