import { faultOf } from '../core/fault.js';
import {
  DATABASE_UNAVAILABLE,
  isDatabaseUnavailable,
  isTransientDatabaseFault,
  isWriteRefused,
} from '../db/errors.js';

/** What the answer to a fault says, beyond 500. */
export interface FaultAnswer {
  /** Retry-After: a retry may meet a working service after this many seconds */
  retryAfterSeconds?: number;
  /** 503 with this message */
  unavailable?: string;
  /** a backend call got no answer in time: the pool watchdog hears of it */
  timeout?: boolean;
}

const BACKEND_TIMEOUTS = new Set(['deadline_exceeded', 'database_timeout']);

/**
 * The answer to `err`: attest's own faults say it themselves (Fault's fields); the database
 * driver's errors are read by their codes. Nothing for a fault of attest without one (a bug:
 * retrying soon will not help).
 */
export function faultAnswer(err: unknown): FaultAnswer {
  const fault = faultOf(err);
  if (fault)
    return {
      ...(fault.retryAfterSeconds === undefined
        ? {}
        : { retryAfterSeconds: fault.retryAfterSeconds }),
      ...(fault.unavailable ? { unavailable: fault.unavailable } : {}),
      ...(BACKEND_TIMEOUTS.has(fault.code) ? { timeout: true } : {}),
    };
  // no database takes the request: the breaker's probe runs every 200 ms, a read-only standby
  // is promoted within seconds
  if (isDatabaseUnavailable(err))
    return { retryAfterSeconds: 1, unavailable: DATABASE_UNAVAILABLE };
  // a full disk or a read-only database is not fixed within a second
  if (isWriteRefused(err)) return { retryAfterSeconds: 5 };
  if (isTransientDatabaseFault(err)) return { retryAfterSeconds: 1 };
  return {};
}
