/**
 * The budget issue 46 set: a test asks the shared fixtures (test/support/fixtures.ts) for a
 * migrated data dir or database instead of building one by hand. A test file builds one by hand
 * when it makes a temp dir, points ATTEST_DATA_DIR or DATABASE_URL at a database and migrates it
 * (`db migrate`, runMigrations, or a server started with `migrate: true`). The few left do so
 * because what they test is that setup itself; each says why at its top.
 */
import { readFileSync } from 'node:fs';
import { relative, resolve } from 'node:path';
import { expect, it } from 'vitest';
import { sources } from './sourceFiles.js';

const TEST = resolve(import.meta.dirname, '..');
const SUPPORT = resolve(TEST, 'support');
const MAX_HAND_BUILT = 4;
/** each of these tests making the data dir itself: see the comment at its top */
const HAND_BUILT = [
  'cli/commands.test.ts',
  'cli/diskFull.process.test.ts',
  'cli/embeddedAppliance.process.test.ts',
  'cli/startup.test.ts',
];

const MAKES_TEMP_DIR = /mkdtemp/;
// `ATTEST_DATA_DIR = ...`, `DATABASE_URL: ...` (TEST_DATABASE_URL is the suite's, not attest's)
const POINTS_ATTEST_AT_A_DATABASE = /(^|[^_A-Z])(ATTEST_DATA_DIR|DATABASE_URL)\b\s*(=[^=]|:)/m;
const MIGRATES = /'db', 'migrate'|runMigrations\(|migrate: true/;

/** Whether `text` makes a temp dir, points attest at a database and migrates it. */
export function buildsDataDirByHand(text: string): boolean {
  return MAKES_TEMP_DIR.test(text) && POINTS_ATTEST_AT_A_DATABASE.test(text) && MIGRATES.test(text);
}

const handBuilt = () =>
  sources(TEST)
    // this file's own examples aside
    .filter((f) => !f.startsWith(SUPPORT + '/') && f !== import.meta.filename)
    .filter((f) => /\.test\.tsx?$/.test(f))
    .filter((f) => buildsDataDirByHand(readFileSync(f, 'utf8')))
    .map((f) => relative(TEST, f))
    .sort();

it(`at most ${MAX_HAND_BUILT} test files build a data dir by hand, each named here`, () => {
  expect(HAND_BUILT.length).toBeLessThanOrEqual(MAX_HAND_BUILT);
  expect(handBuilt()).toEqual([...HAND_BUILT].sort());
});

it('the count can fail: the hand-made setup the fixtures replaced is counted', () => {
  const handMade = [
    "dir = mkdtempSync(join(tmpdir(), 'attest-x-'));",
    "process.env.ATTEST_DATA_DIR = join(dir, 'data');",
    "expect((await runCli('db', 'migrate')).code).toBe(0);",
  ].join('\n');
  expect(buildsDataDirByHand(handMade)).toBe(true);
  expect(buildsDataDirByHand(handMade.replace('ATTEST_DATA_DIR', 'TEST_DATABASE_URL'))).toBe(false);
  const spawned = `const env = baseEnv({ DATABASE_URL: url });\nmkdtempSync(x);\nstartServer(c, l, { migrate: true })`;
  expect(buildsDataDirByHand(spawned)).toBe(true);
});
