/**
 * What a repository needs of the database: the drizzle handle's type, the handle an opener gives
 * (DatabaseHandle) and rowsOf. Apart from client.ts, which opens a database (and may start a
 * PostgreSQL server): a repository imports this module, never the opener.
 */
import type { PgDatabase } from 'drizzle-orm/pg-core';
import type { AdminDoor } from './dataDirLock.js';
import type { ConnectionPlan } from './poolerProbe.js';
import type { tables } from './tables.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- both drivers' result kinds
export type Database = PgDatabase<any, typeof tables>;

export interface DatabaseHandle {
  db: Database;
  /**
   * The same pool, each statement of it waiting at most `ms` for its answer (lag-aware; a window
   * in which the pool answered others is granted again), then failing with DatabaseTimeoutError:
   * what a request's repositories use, so a database gone silent (packets dropped, not refused)
   * releases the request within `ms` whatever its own deadline. A view of its own rather than a
   * scope (AsyncLocalStorage): on Node 20 a scope makes every promise of the process pay
   * async_hooks' init and after hooks (2.5-3.6% of an assertion's CPU, 6% of its allocations,
   * docs/benchmark-http.md). Absent on handles that are not a PostgreSQL pool: `db` then.
   */
  bounded?(ms: number): Database;
  /**
   * `postgres`: a server given by DATABASE_URL; `embedded`: the PostgreSQL server this process
   * started in the data dir and owns (embeddedServer.ts), reached over its Unix socket
   */
  kind: 'postgres' | 'embedded';
  /** where it is, for messages (never a password) */
  where: string;
  /** seconds a new connection may take before it fails (ATTEST_DB_CONNECT_TIMEOUT) */
  connectTimeoutSeconds: number;
  /**
   * The connection URL (secret: never print it), for single-connection work and for other
   * processes (the embedded server's is postgres://…?host=<its socket folder>)
   */
  url?: string;
  /** embedded only: the data dir (backup reads the cluster there) */
  dataDir?: string;
  /**
   * Replaces the pool with a new one. postgres-js never times a query out, so a
   * pool whose connections lost their peer without a reset (a silent partition) waits forever.
   */
  recycle?(): Promise<void>;
  /**
   * `select 1` on a fresh connection of its own, outside the pool, within
   * `timeoutMs` of time the event loop could use (see lagAwareDeadline). Rejects when the database
   * cannot be reached or does not answer.
   */
  probe?(timeoutMs: number): Promise<void>;
  /**
   * How many of attest's statements the server holds until a synchronous standby confirms
   * their commit (pg_stat_activity wait_event SyncRep), asked like `probe` on a fresh connection.
   * Such statements are not on dead connections: replacing the pool would leave their server
   * processes waiting, each holding a connection slot, until none is left (SQLSTATE 53300).
   */
  commitsAwaitingStandby?(timeoutMs: number): Promise<number>;
  /**
   * Embedded database opened by the server only: records the admin socket and this run's secret
   * in the 0600 lock file, where the CLI finds them.
   */
  announce?(admin: AdminDoor): void;
  /**
   * LISTENs on `channel` on a connection of its own (postgres.js reconnects it),
   * calling `onNotify` with each payload and `onListen` each time the LISTEN is in place (first
   * and after every reconnect, when notifications may have been missed). Ended by `close`.
   */
  listen?(
    channel: string,
    onNotify: (payload: string) => void,
    onListen: () => void,
  ): Promise<void>;
  /**
   * How this process uses its connections (the change feed, statement_timeout, prepared
   * statements), decided when it opened; absent on handles that are not a PostgreSQL pool
   */
  connections?: ConnectionPlan;
  /**
   * Embedded only: resolves when its server died and could not be started again within the
   * bound (embeddedSupervisor.ts); the caller closes the handle and exits non-zero
   */
  failed?: Promise<Error>;
  close(): Promise<void>;
}

/** `handle`'s statements bounded by `ms` where the handle can (DatabaseHandle.bounded), else its `db`. */
export function boundedDb(handle: DatabaseHandle, ms: number): Database {
  return handle.bounded?.(ms) ?? handle.db;
}

/** Rows of a raw `db.execute` result on either driver. */
export function rowsOf<T>(result: unknown): T[] {
  if (Array.isArray(result)) return result as T[];
  return ((result as { rows?: T[] }).rows ?? []) as T[];
}
