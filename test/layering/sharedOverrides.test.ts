/**
 * Files of vitest's shared project (isolate: false) run one after another in one worker: a
 * fixture override (`it.override`) made at a file's top level outlives it, so the next file's
 * data dir would be made with its variables (a master key the next server does not have). Each
 * such file runs in a project of its own (vitest.config.ts's MOCKING list).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');
// the shared project's folders (vitest.config.ts SHARED)
const SHARED = ['core', 'google', 'fuzz', 'docs', 'client', 'server', 'db'];

function testFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.test.ts'))
    .map((f) => join(dir, f));
}

it('every shared-project file that overrides a fixture runs apart from the shared worker', () => {
  const config = readFileSync(join(ROOT, 'vitest.config.ts'), 'utf8');
  const overriding = SHARED.flatMap((d) => testFiles(join(ROOT, 'test', d)))
    .filter((f) => /\b(it|test)\.override\(/.test(readFileSync(f, 'utf8')))
    .map((f) => relative(ROOT, f));
  expect(overriding).toContain('test/db/devReceipts.test.ts');
  expect(overriding.filter((f) => !config.includes(`'${f}'`))).toEqual([]);
});
