import { Fault } from '../core/fault.js';
import { DATABASE_UNAVAILABLE } from './errors.js';
import { lagAwareDeadline, LagAwareTimeoutError } from './lagAwareDeadline.js';

/** A statement got no answer within the database wait deadline: its waiter was released. */
export class DatabaseTimeoutError extends Fault {
  override readonly name = 'DatabaseTimeoutError';
  constructor(message: string) {
    super('database_timeout', message, { retryAfterSeconds: 1, unavailable: DATABASE_UNAVAILABLE });
  }
}

/** When a pool last got an answer to any statement (performance.now()). */
export interface DatabaseProgress {
  lastAnswerAt: number;
}

/**
 * `work` bounded by `ms` (lag-aware); its timeout is DatabaseTimeoutError. Given the pool's
 * `progress`, a window in which the pool answered other statements is granted again: a queue
 * behind busy connections is a loaded database, and only one that answers nothing for `ms` is
 * silent (the request's own deadline still bounds the whole wait).
 */
export function boundDatabaseWait<T>(
  work: Promise<T>,
  ms: number,
  progress?: DatabaseProgress,
): Promise<T> {
  // each window ends `ms` after the later of its opening and the pool's last answer, so a
  // database that falls silent releases every waiter within `ms` of its last answer
  const window = (length: number): Promise<T> => {
    const openedAt = performance.now();
    return lagAwareDeadline(work, length).catch((err: unknown) => {
      if (!(err instanceof LagAwareTimeoutError)) throw err;
      if (progress && progress.lastAnswerAt > openedAt)
        return window(Math.max(1, progress.lastAnswerAt + ms - performance.now()));
      throw new DatabaseTimeoutError(`the database did not answer within ${ms} ms`);
    });
  };
  return window(ms);
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
