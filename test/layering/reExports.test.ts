/**
 * One import path per symbol: no module re-exports another's names (no barrels), except the
 * client's entry point, which is the package's one public surface. The storage modules below are
 * what is left (the drizzle schema's parts, which drizzle reads as one module; the statistics
 * types, beside work on them).
 */
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { expect, it } from 'vitest';
import { sources, SRC } from './sourceFiles.js';

const ENTRY_POINT = 'client/index.ts';
const LEFT = ['db/schema.ts', 'db/verificationStats.ts'];

/** `file: statement` for each `export ... from` of a file. */
function reExports(files: string[]): string[] {
  return files.flatMap((f) =>
    [
      ...readFileSync(f, 'utf8').matchAll(
        /^export\s+(?:type\s+)?(?:\*|\{[^}]*\})\s+from\s+'[^']+'/gm,
      ),
    ].map((m) => `${relative(SRC, f)}: ${m[0].replace(/\s+/g, ' ')}`),
  );
}

it('no module outside the client entry point re-exports another', () => {
  const files = sources(SRC).filter((f) => ![ENTRY_POINT, ...LEFT].includes(relative(SRC, f)));
  expect(reExports(files)).toEqual([]);
});

it('the scan sees re-exports (the client entry point has them)', () => {
  expect(
    reExports(sources(SRC).filter((f) => relative(SRC, f) === ENTRY_POINT)).length,
  ).toBeGreaterThan(0);
});
