/**
 * The layers' import rules, read from the sources: the CLI sits on top, so nothing outside
 * src/cli imports it (the server and the admin operations run without commander or ink).
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

/** Relative imports of a file, as paths below src/. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const found = [...text.matchAll(/(?:from|import)\s*\(?\s*['"](\.[^'"]+)['"]/g)];
  return found.map((m) => relative(SRC, resolve(dirname(file), m[1]!)));
}

it('nothing outside src/cli imports src/cli', () => {
  const offenders = sources(SRC)
    .filter((f) => !relative(SRC, f).startsWith('cli/'))
    .flatMap((f) =>
      importsOf(f)
        .filter((target) => target.startsWith('cli/'))
        .map((target) => `${relative(SRC, f)} -> ${target}`),
    );
  expect(offenders).toEqual([]);
});

it('the scan sees imports (a CLI file importing the CLI is found)', () => {
  expect(importsOf(join(SRC, 'cli', 'main.ts'))).toContain('cli/errors.js');
});
