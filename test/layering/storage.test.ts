/**
 * Storage sits below the admin transport, the server and the CLI: nothing in src/db imports
 * them (the admin socket's path rules live in src/socketPath.ts, below both).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { expect, it } from 'vitest';

const SRC = resolve(import.meta.dirname, '..', '..', 'src');

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? sources(join(dir, e.name))
      : /\.tsx?$/.test(e.name)
        ? [join(dir, e.name)]
        : [],
  );
}

/** Relative imports of a file (static, dynamic and re-exports), as paths below src/. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const found = [...text.matchAll(/(?:from|import)\s*\(?\s*['"](\.[^'"]+)['"]/g)];
  return found.map((m) => relative(SRC, resolve(dirname(file), m[1]!)));
}

const ABOVE_STORAGE = ['admin/', 'server/', 'cli/'];

it('nothing in src/db imports src/admin, src/server or src/cli', () => {
  const offenders = sources(join(SRC, 'db')).flatMap((f) =>
    importsOf(f)
      .filter((target) => ABOVE_STORAGE.some((layer) => target.startsWith(layer)))
      .map((target) => `${relative(SRC, f)} -> ${target}`),
  );
  expect(offenders).toEqual([]);
});

it('the scan sees a storage module reaching up (src/db/client.ts names its imports)', () => {
  expect(importsOf(join(SRC, 'db', 'client.ts'))).toContain('socketPath.js');
});
