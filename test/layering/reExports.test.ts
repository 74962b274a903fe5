/**
 * One import path per symbol: no module re-exports another's names (no barrels), except the
 * client's entry point, which is the package's one public surface. Outside it the budget is
 * {@link BUDGET} re-exports (today none is left): an `export ... from` statement, on one line or
 * many, or an `export { name }` of a name the module imported.
 */
import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { expect, it } from 'vitest';
import { sources, SRC } from './sourceFiles.js';

const ENTRY_POINT = 'client/index.ts';
const BUDGET = 2;

/** `file: statement` for each `export ... from` of a file. */
function reExportsFrom(file: string, text: string): string[] {
  return [
    ...text.matchAll(
      /^export\s+(?:type\s+)?(?:\*(?:\s+as\s+\w+)?|\{[^}]*\})\s+from\s+['"][^'"]+['"]/gm,
    ),
  ].map((m) => `${relative(SRC, file)}: ${m[0].replace(/\s+/g, ' ')}`);
}

/** `file: statement` for each `export { a, b }` (no `from`) that names an imported binding. */
function reExportsOfImports(file: string, text: string): string[] {
  const imported = new Set(
    [...text.matchAll(/^import\s+(?:type\s+)?([^'";]*?)\s+from\s+['"][^'"]+['"]/gm)].flatMap((m) =>
      m[1]!
        .replace(/[{}]/g, ',')
        .split(',')
        .map((part) => part.trim().replace(/^type\s+/, ''))
        .map((part) =>
          part
            .split(/\s+as\s+/)
            .pop()!
            .replace(/^\*\s*/, ''),
        )
        .filter(Boolean),
    ),
  );
  return [...text.matchAll(/^export\s+(?:type\s+)?\{([^}]*)\}\s*;/gm)]
    .filter((m) =>
      m[1]!
        .split(',')
        .map(
          (part) =>
            part
              .trim()
              .replace(/^type\s+/, '')
              .split(/\s+as\s+/)[0]!,
        )
        .some((name) => imported.has(name)),
    )
    .map((m) => `${relative(SRC, file)}: ${m[0].replace(/\s+/g, ' ')}`);
}

function reExports(files: string[]): string[] {
  return files.flatMap((f) => {
    const text = readFileSync(f, 'utf8');
    return [...reExportsFrom(f, text), ...reExportsOfImports(f, text)];
  });
}

it(`at most ${BUDGET} re-exports outside the client entry point`, () => {
  const found = reExports(sources(SRC).filter((f) => relative(SRC, f) !== ENTRY_POINT));
  expect(found.length, found.join('\n')).toBeLessThanOrEqual(BUDGET);
});

it('the scan sees re-exports: the client entry point has them, of both forms', () => {
  expect(reExports([join(SRC, ENTRY_POINT)]).length).toBeGreaterThan(0);
  const sample = join(SRC, 'sample.ts');
  expect([
    ...reExportsFrom(
      sample,
      "export {\n  a,\n  type B,\n} from './a.js';\nexport * from './c.js';",
    ),
    ...reExportsOfImports(
      sample,
      "import { a, type B } from './a.js';\nexport { a };\nexport { own };",
    ),
  ]).toEqual([
    "sample.ts: export { a, type B, } from './a.js'",
    "sample.ts: export * from './c.js'",
    'sample.ts: export { a };',
  ]);
});
