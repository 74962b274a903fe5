import { isConnectionError } from './errors.js';

// the server ending or killing a backend (restart, failover, pg_terminate_backend)
const TERMINATION_STATES = new Set(['57P01', '57P02', '57P03']);

/**
 * True for a rejection postgres.js raised on a query's connection: a connection error or a
 * terminated backend, carrying the driver's `query` property.
 */
export function isDriverRejection(reason: unknown): boolean {
  if (!reason || typeof reason !== 'object' || !('query' in reason)) return false;
  const code = String((reason as { code?: unknown }).code ?? '');
  return isConnectionError(reason) || TERMINATION_STATES.has(code);
}

let installed = 0;
let ignored = 0;

function onUnhandledRejection(reason: unknown): void {
  if (isDriverRejection(reason)) {
    ignored++;
    return;
  }
  // alone, this listener would otherwise have switched off Node's default (throw, so exit)
  if (process.listenerCount('unhandledRejection') === 1) throw reason;
}

/**
 * Keeps the process alive when postgres.js rejects a promise of its own that nobody can await:
 * a connection dying while it fetches the array types at start-up (in connected(), after every
 * (re)connect) rejects that internal query unhandled (postgres.js issues #1192, #1223), and on
 * Node >= 15 an unhandled rejection exits the process. Only those rejections are dropped; any
 * other still ends the process as Node's default would. Reference-counted: the returned function
 * removes the listener when the last pool that installed it closes.
 */
export function guardDriverRejections(): () => void {
  if (installed++ === 0) process.on('unhandledRejection', onUnhandledRejection);
  let removed = false;
  return () => {
    if (removed) return;
    removed = true;
    if (--installed === 0) process.off('unhandledRejection', onUnhandledRejection);
  };
}

/** How many driver rejections the guard dropped in this process (for tests and the log). */
export function ignoredDriverRejections(): number {
  return ignored;
}
