import { createMiddleware } from 'hono/factory';
import type { AppEnv, Budget } from '../appEnv.js';

/** A backend call that did not answer within the request's budget; the app answers 500. */
export class DeadlineExceeded extends Error {
  override readonly name = 'DeadlineExceeded';
}

/** Races each backend call against what is left of `ms` for the request; time in between is free. */
export function createBudget(ms: number): Budget {
  let used = 0;
  return async (work) => {
    const started = performance.now();
    let timer: NodeJS.Timeout | undefined;
    const remaining = ms - used;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new DeadlineExceeded(`no answer from the backend within ${ms} ms`)),
        Math.max(0, remaining),
      );
    });
    try {
      return await Promise.race([work, deadline]);
    } finally {
      clearTimeout(timer);
      used += performance.now() - started;
    }
  };
}

/**
 * Gives each request `c.get('backend')`, its budget of `deadlineMs` for time spent waiting on the
 * backend (not on a slow client's body, which Node's own request timeout bounds): a bounded answer
 * even when the database hangs. An exceeded budget throws DeadlineExceeded.
 */
export const backendBudget = (opts: { deadlineMs: number }) =>
  createMiddleware<AppEnv>(async (c, next) => {
    c.set('backend', createBudget(opts.deadlineMs));
    await next();
  });
