import { Fault } from '../../core/fault.js';
import { createMiddleware } from 'hono/factory';
import type { DatabaseBreaker } from '../../db/databaseBreaker.js';
import { isDatabaseTimeout } from '../../db/databaseDeadline.js';
import { DatabaseUnavailableError } from '../../db/errors.js';
import type { AppEnv, Budget } from '../appEnv.js';

/** A backend call that did not answer within the request's budget; the app answers 500. */
export class DeadlineExceeded extends Fault {
  override readonly name = 'DeadlineExceeded';
  constructor(message: string) {
    super('deadline_exceeded', message, { retryAfterSeconds: 1 });
  }
}

/** A backend call that waited this long has the breaker probe the database (if it has not lately). */
export const SUSPECT_AFTER_MS = 1000;

/**
 * Races each backend call against what is left of `ms` for the request; time in between is free.
 * With a `breaker`: while it is open a call fails at once with DatabaseUnavailableError (a
 * function is not called; a promise is left to fail on its own), a call in flight when it opens fails then, a connection error or a
 * call slower than SUSPECT_AFTER_MS has it probe the database.
 */
export function createBudget(
  ms: number,
  breaker?: Pick<DatabaseBreaker, 'check' | 'failed' | 'suspect' | 'onOpen'>,
): Budget {
  let used = 0;
  return async (call) => {
    if (breaker) {
      try {
        breaker.check();
      } catch (err) {
        if (typeof call !== 'function') call.catch(() => {});
        throw err;
      }
    }
    const work = typeof call === 'function' ? call() : call;
    const started = performance.now();
    let timer: NodeJS.Timeout | undefined;
    let suspect: NodeJS.Timeout | undefined;
    let unsubscribe: (() => void) | undefined;
    const remaining = ms - used;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new DeadlineExceeded(`no answer from the backend within ${ms} ms`)),
        Math.max(0, remaining),
      );
      if (breaker) {
        unsubscribe = breaker.onOpen(() =>
          reject(new DatabaseUnavailableError('the database cannot be reached')),
        );
        if (remaining > SUSPECT_AFTER_MS)
          suspect = setTimeout(() => breaker.suspect(), SUSPECT_AFTER_MS);
      }
    });
    try {
      return await Promise.race([work, deadline]);
    } catch (err) {
      // a statement unanswered within the database wait deadline: the database may be silent
      if (err instanceof DeadlineExceeded || isDatabaseTimeout(err)) breaker?.suspect();
      else if (!(err instanceof DatabaseUnavailableError)) breaker?.failed(err);
      throw err;
    } finally {
      clearTimeout(timer);
      clearTimeout(suspect);
      unsubscribe?.();
      used += performance.now() - started;
    }
  };
}

/**
 * Gives each request `c.get('backend')`, its budget of `deadlineMs` for time spent waiting on the
 * backend (not on a slow client's body, which Node's own request timeout bounds): a bounded answer
 * even when the database hangs. An exceeded budget throws DeadlineExceeded; an open `breaker`
 * DatabaseUnavailableError, at once. Each statement's own, shorter wait is the repositories'
 * (DatabaseHandle.bounded, wired in wireApp.ts): a silent database releases the request long
 * before its budget runs out.
 */
export const backendBudget = (opts: {
  deadlineMs: number;
  breaker?: Pick<DatabaseBreaker, 'check' | 'failed' | 'suspect' | 'onOpen'> | undefined;
}) =>
  createMiddleware<AppEnv>(async (c, next) => {
    c.set('backend', createBudget(opts.deadlineMs, opts.breaker));
    await next();
  });
