import { AsyncLocalStorage } from 'node:async_hooks';
import { lagAwareDeadline, LagAwareTimeoutError } from './lagAwareDeadline.js';

/** A statement got no answer within the database wait deadline: its waiter was released. */
export class DatabaseTimeoutError extends Error {
  override readonly name = 'DatabaseTimeoutError';
}

const scope = new AsyncLocalStorage<number>();

/**
 * Runs `fn` with every statement it starts (on a driver that honours it: postgres.js, see
 * client.ts) bounded by `ms` of time the event loop could have read the answer in. A request runs
 * under it, so a database gone silent (packets dropped, not refused) releases the request within
 * `ms` of its wait starting, whatever the request's own deadline; what the request starts and
 * others share (a key's row, the allowlist) is bounded too and fails for all who share it.
 */
export function withDatabaseDeadline<T>(ms: number, fn: () => T): T {
  return scope.run(ms, fn);
}

/** The deadline of the current scope, undefined outside one (background work, migrations). */
export function currentDatabaseDeadline(): number | undefined {
  return scope.getStore();
}

/** `work` bounded by `ms` (lag-aware); its timeout is DatabaseTimeoutError. */
export function boundDatabaseWait<T>(work: Promise<T>, ms: number): Promise<T> {
  return lagAwareDeadline(work, ms).catch((err: unknown) => {
    if (err instanceof LagAwareTimeoutError)
      throw new DatabaseTimeoutError(`the database did not answer within ${ms} ms`);
    throw err;
  });
}

/** True for DatabaseTimeoutError, also inside drizzle's wrapper (its `cause`). */
export function isDatabaseTimeout(err: unknown): boolean {
  let e = err;
  for (let depth = 0; depth < 5 && e && typeof e === 'object'; depth++) {
    if (e instanceof DatabaseTimeoutError) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}
