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
let nullSocketWrites = 0;
const recyclers = new Set<(fault: Error) => void>();

/**
 * True for exactly postgres.js's crash on a connection that closed while a write was queued
 * (porsager/postgres #1154, #1208; unfixed in 3.4.9, the newest release): its `nextWrite` calls
 * `socket.write` after `closed()` set the socket to null, from a setImmediate or a socket handler
 * where no promise can catch it. Matched by type, message and the frame it is thrown from.
 */
export function isNullSocketWrite(err: unknown): err is TypeError {
  if (!(err instanceof TypeError)) return false;
  if (err.message !== "Cannot read properties of null (reading 'write')") return false;
  const top = String(err.stack ?? '').split('\n')[1] ?? '';
  return /\bnextWrite \(.*[\\/]postgres[\\/](cjs[\\/])?src[\\/]connection\.js:\d+:\d+\)$/.test(top);
}

function onUncaughtException(err: unknown): void {
  if (isNullSocketWrite(err)) {
    nullSocketWrites++;
    // the connection it hit is left half-written (its buffer and write timer are stale): every
    // pool is replaced, and what waited on it is released by its deadline or the pool's end
    for (const recycle of recyclers) recycle(err);
    return;
  }
  // alone, this listener would otherwise have switched off Node's default (print, exit 1): it
  // steps aside and the error is thrown again, outside any handler
  if (process.listenerCount('uncaughtException') === 1) {
    process.off('uncaughtException', onUncaughtException);
    process.nextTick(() => {
      throw err;
    });
  }
}

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
 * other still ends the process as Node's default would. It also catches the one uncaught exception
 * postgres.js throws on a closed connection (isNullSocketWrite) and has `recycle` replace the
 * pool; any other uncaught exception still ends the process. Reference-counted: the returned function
 * removes the listener when the last pool that installed it closes.
 */
export function guardDriverRejections(recycle?: (fault: Error) => void): () => void {
  if (installed++ === 0) {
    process.on('unhandledRejection', onUnhandledRejection);
    process.on('uncaughtException', onUncaughtException);
  }
  if (recycle) recyclers.add(recycle);
  let removed = false;
  return () => {
    if (removed) return;
    removed = true;
    if (recycle) recyclers.delete(recycle);
    if (--installed === 0) {
      process.off('unhandledRejection', onUnhandledRejection);
      process.off('uncaughtException', onUncaughtException);
    }
  };
}

/** How many of postgres.js's null-socket writes (isNullSocketWrite) the guard caught in this process. */
export function caughtNullSocketWrites(): number {
  return nullSocketWrites;
}

/** How many driver rejections the guard dropped in this process (for tests and the log). */
export function ignoredDriverRejections(): number {
  return ignored;
}
