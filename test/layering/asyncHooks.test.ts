/**
 * No module of src/ uses node:async_hooks (AsyncLocalStorage, AsyncResource, createHook): on
 * Node 20 one AsyncLocalStorage scope switches on promise hooks for the whole process, and every
 * promise of every request then pays their init and after calls (2.5-3.6% of an assertion's CPU,
 * 6% of its allocations: docs/benchmark-http.md). What a request carries is passed explicitly
 * (a statement's wait deadline: DatabaseHandle.bounded).
 */
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { expect, it } from 'vitest';
import { sources, SRC } from './sourceFiles.js';

it('no source file imports node:async_hooks', () => {
  const users = sources(SRC).filter((f) =>
    /from\s+['"](?:node:)?async_hooks['"]|import\(\s*['"](?:node:)?async_hooks['"]/.test(
      readFileSync(f, 'utf8'),
    ),
  );
  expect(users.map((f) => relative(SRC, f))).toEqual([]);
});
