/**
 * The shape issue 29 set: every evidence kind lives in its own folder (src/cli/kinds/<kind>/,
 * listed by src/cli/kinds/registry.ts), so the generic commands barely name a kind, and no
 * source file grows past 500 lines (the shipped status list is data, not code).
 */
import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { expect, it } from 'vitest';
import { sources, SRC } from './sourceFiles.js';

const MAX_LINES = 500;
const DATA = ['core/androidKey/revocationSnapshot.ts'];
const GENERIC_COMMANDS = ['verifyFile.ts', 'allowlist.ts', 'dev.ts', 'token.ts'];
const MAX_KIND_LINES = 40;
const KIND_WORD = /apple|gms|android/i;

const lineCount = (file: string) => readFileSync(file, 'utf8').split('\n').length - 1;

it(`no source file is over ${MAX_LINES} lines, data aside`, () => {
  const long = sources(SRC)
    .filter((f) => !DATA.includes(relative(SRC, f)))
    .map((f) => ({ file: relative(SRC, f), lines: lineCount(f) }))
    .filter((f) => f.lines > MAX_LINES);
  expect(long).toEqual([]);
});

it(`verify-file, allowlist, dev and token name a kind on at most ${MAX_KIND_LINES} lines together`, () => {
  const lines = GENERIC_COMMANDS.flatMap((name) =>
    readFileSync(join(SRC, 'cli', 'commands', name), 'utf8')
      .split('\n')
      .filter((line) => KIND_WORD.test(line)),
  );
  expect(lines.length).toBeLessThanOrEqual(MAX_KIND_LINES);
});

it('the counts can fail: a kind file names its kind, the data file is long', () => {
  const apple = readFileSync(join(SRC, 'cli', 'kinds', 'apple', 'appleKind.ts'), 'utf8');
  expect(apple.split('\n').filter((line) => KIND_WORD.test(line)).length).toBeGreaterThan(0);
  expect(lineCount(join(SRC, DATA[0]!))).toBeGreaterThan(MAX_LINES);
});
