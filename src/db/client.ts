import { existsSync, mkdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
// PGlite stays a static import: loaded lazily, the embedded database opened measurably slower
import { PGlite } from '@electric-sql/pglite';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import type { PgDatabase } from 'drizzle-orm/pg-core';
import type { Sql } from 'postgres';
import {
  acquireLock,
  announceInLock,
  LOCK_FILE,
  readLiveLock,
  type AdminDoor,
  type StaleLock,
} from './dataDirLock.js';
import { embeddedUnavailable } from './errors.js';
import { assertPrivate, DataDirUnsafeError } from './runningServer.js';
import { redactUrl } from './redactUrl.js';
import * as schema from './schema.js';
import { processName } from './processName.js';
import { createFromTemplate } from './template.js';
import {
  applyEmbeddedWalSettings,
  maintainEmbedded,
  startEmbeddedCheckpoints,
} from './embeddedWal.js';
import { BackupRefusedError, DEFAULT_MAX_UNPACKED_BYTES, unpackBackup } from './backupArchive.js';

const gzipAsync = promisify(gzip);
import { guardDriverRejections } from './driverRejections.js';
import { lagAwareDeadline } from './lagAwareDeadline.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- both drivers' result kinds
export type Database = PgDatabase<any, typeof schema>;

export interface DatabaseHandle {
  db: Database;
  /** `postgres`: a server; `embedded`: PGlite, opened by this process alone */
  kind: 'postgres' | 'embedded';
  /** where it is, for messages (never a password) */
  where: string;
  /** seconds a new connection may take before it fails (ATTEST_DB_CONNECT_TIMEOUT) */
  connectTimeoutSeconds: number;
  /** PostgreSQL only: the connection URL (secret: never print it), for single-connection work */
  url?: string;
  /**
   * PostgreSQL only: replaces the pool with a new one. postgres-js never times a query out, so a
   * pool whose connections lost their peer without a reset (a silent partition) waits forever.
   */
  recycle?(): Promise<void>;
  /**
   * PostgreSQL only: `select 1` on a fresh connection of its own, outside the pool, within
   * `timeoutMs` of time the event loop could use (see lagAwareDeadline). Rejects when the database
   * cannot be reached or does not answer.
   */
  probe?(timeoutMs: number): Promise<void>;
  /**
   * Embedded only: a consistent snapshot of the whole database, as PGlite's gzipped tar
   * (`dumpDataDir`): taken at a checkpoint, with no statement running meanwhile.
   */
  dump?(): Promise<Blob>;
  /**
   * Embedded database opened by the server only: records the admin socket and this run's secret
   * in the 0600 lock file, where the CLI finds them.
   */
  announce?(admin: AdminDoor): void;
  /**
   * LISTENs on `channel`: on PostgreSQL on a connection of its own (postgres.js reconnects it),
   * on the embedded database in its one session,
   * calling `onNotify` with each payload and `onListen` each time the LISTEN is in place (first
   * and after every reconnect, when notifications may have been missed). Ended by `close`.
   */
  listen?(
    channel: string,
    onNotify: (payload: string) => void,
    onListen: () => void,
  ): Promise<void>;
  close(): Promise<void>;
}

export type { AdminDoor, StaleLock } from './dataDirLock.js';
export {
  DataDirUnsafeError,
  findRunningServer,
  lockHolder,
  type LockHolder,
  type RunningServer,
} from './runningServer.js';
export { redactUrl } from './redactUrl.js';

export interface OpenOptions {
  /** a postgres:// URL; when absent the embedded database in `dataDir` is used */
  url?: string | undefined;
  dataDir: string;
  /**
   * `server`: owns the embedded database (and announces its admin socket in the lock file).
   * `cli`: opens the directory itself; refused while another process holds it.
   */
  role: 'server' | 'cli';
  /** pool size for PostgreSQL */
  poolSize?: number;
  /** seconds a connection may take to be ready (default 10) */
  connectTimeoutSeconds?: number;
  /** false: refuse, rather than create, an embedded database that does not exist yet (default true) */
  create?: boolean;
  /** told what takes time while it happens (creating the embedded database) */
  onProgress?: (message: string) => void;
  /** told of a lock left by a process that is gone, removed before the embedded database opened */
  onStaleLock?: (stale: StaleLock) => void;
}

export const DEFAULT_CONNECT_TIMEOUT_SECONDS = 10;

/** The embedded database is held by another live process. */
export class DatabaseBusyError extends Error {
  override readonly name = 'DatabaseBusyError';
}

/** There is no embedded database where one was expected, and the caller may not create one. */
export class DatabaseMissingError extends Error {
  override readonly name = 'DatabaseMissingError';
}

// PGlite wants a folder of its own: the lock sits beside it
export const PG_DIR = 'pgdata';

/**
 * PostgreSQL connections per process. Fewer connections carry more statements each (postgres.js
 * pipelines them, one socket write for several) and wake fewer server processes: at 64 concurrent
 * clients 3 to 6 answered App Attest assertions 15-20% faster than 10 did, with less CPU each
 * (docs/benchmark-http.md), and N instances need only 5 N of PostgreSQL's connections.
 */
const POOL_SIZE = 4;

/** Opens the configured database (the embedded one only when no other process holds it). */
export async function openDatabase(options: OpenOptions): Promise<DatabaseHandle> {
  const connectTimeoutSeconds = options.connectTimeoutSeconds ?? DEFAULT_CONNECT_TIMEOUT_SECONDS;
  if (options.url)
    return await openPostgres(
      options.url,
      options.poolSize ?? POOL_SIZE,
      options.role === 'server',
      connectTimeoutSeconds,
    );
  const dataDir = resolve(options.dataDir);
  const pgDir = join(dataDir, PG_DIR);
  if (existsSync(dataDir)) assertPrivate(dataDir);
  const exists = existsSync(join(pgDir, 'PG_VERSION'));
  if (!exists && options.create === false) {
    throw new DatabaseMissingError(
      `no attest database in ${dataDir} (the folder ATTEST_DATA_DIR names, default ./.attest): run this where that folder is, set ATTEST_DATA_DIR to it, or create one with "attest db migrate"`,
    );
  }
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  assertPrivate(dataDir);
  const lockPath = join(dataDir, LOCK_FILE);
  const holder = readLiveLock(lockPath, options.onStaleLock);
  if (holder) {
    throw new DatabaseBusyError(
      `the embedded database in ${dataDir} is in use by ${processName(holder.pid)}` +
        (holder.admin ? '' : '; wait for it to finish') +
        (options.role === 'server'
          ? '; stop that process or set ATTEST_DATA_DIR to another folder'
          : ''),
    );
  }
  let pglite: PGlite | undefined;
  try {
    acquireLock(lockPath, (message) => new DatabaseBusyError(message));
  } catch (err) {
    throw embeddedUnavailable(dataDir, err);
  }
  try {
    if (!exists) {
      options.onProgress?.(`creating the embedded database in ${options.dataDir}…`);
      // a folder without PG_VERSION is left to PGlite, as before: never delete what is there
      if (!existsSync(pgDir)) createFromTemplate(pgDir);
    }
    pglite = await PGlite.create({ dataDir: pgDir });
    applyEmbeddedWalSettings(pglite);
  } catch (err) {
    await pglite?.close().catch(() => {});
    rmSync(lockPath, { force: true });
    throw embeddedUnavailable(dataDir, err);
  }
  const db = drizzlePglite(pglite, { schema }) as unknown as Database;
  const opened = pglite;
  const checkpoints = startEmbeddedCheckpoints(opened);
  return {
    db,
    kind: 'embedded',
    where: dataDir,
    connectTimeoutSeconds,
    dump: () => dumpPglite(opened),
    // the change triggers' NOTIFY reaches the server however a row was written (an admin
    // operation, a test or any in-process path), as on PostgreSQL; PGlite has one session, which
    // is never lost, so onListen is called once
    async listen(channel, onNotify, onListen) {
      await opened.listen(channel, onNotify);
      onListen();
    },
    ...(options.role === 'server'
      ? {
          announce(admin: AdminDoor) {
            announceInLock(lockPath, admin);
          },
        }
      : {}),
    async close() {
      // the lock goes even when PGlite fails to close (a full disk): the process is done with it
      try {
        await checkpoints.stop();
        await opened.close();
      } finally {
        rmSync(lockPath, { force: true });
      }
    },
  };
}

/**
 * PGlite's data directory as a gzipped tar, consistent: a vacuum and a checkpoint first (with wal_recycle off
 * it also deletes the segments before it, so the backup carries only the live WAL and a restore
 * has little to replay), then the copy under PGlite's query lock, so no statement runs meanwhile.
 * Only the copy holds the lock: the gzip runs after it, in libuv's thread pool, while requests go on.
 */
async function dumpPglite(pglite: PGlite): Promise<Blob> {
  await maintainEmbedded(pglite);
  const tar = await pglite.runExclusive(() => pglite.dumpDataDir('none'));
  const gzipped = await gzipAsync(new Uint8Array(await tar.arrayBuffer()));
  return new Blob([new Uint8Array(gzipped)], { type: 'application/x-gzip' });
}

/**
 * Creates the embedded database in `dataDir` from a backup made by `dump` (PGlite's gzipped
 * tar), read from `backup` as it streams. `dataDir` must hold no database: the caller checks, and
 * the tar is unpacked beside `pgdata` first (bounded and checked entry by entry: see
 * backupArchive), opened, and checked to be an attest database (attest's migrations table with a
 * shipped migration in it, and the first migration's tables) before it is renamed into place, so a
 * refused or failed restore leaves nothing that looks like a database. Refusals are
 * BackupRefusedError.
 */
export async function restoreEmbedded(
  dataDir: string,
  backup: Readable,
  limits: { maxBytes: number } = { maxBytes: DEFAULT_MAX_UNPACKED_BYTES },
): Promise<void> {
  const dir = resolve(dataDir);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  assertPrivate(dir);
  const lockPath = join(dir, LOCK_FILE);
  const holder = readLiveLock(lockPath);
  if (holder)
    throw new DatabaseBusyError(
      `the embedded database in ${dir} is in use by process ${holder.pid}: stop it first`,
    );
  acquireLock(lockPath, (message) => new DatabaseBusyError(message));
  const partial = join(dir, `${PG_DIR}.restoring-${process.pid}`);
  try {
    if (existsSync(join(dir, PG_DIR)))
      throw new DatabaseBusyError(`${dir} already holds a database`);
    rmSync(partial, { recursive: true, force: true });
    await unpackBackup(backup, partial, limits);
    let pglite: PGlite;
    try {
      pglite = await PGlite.create({ dataDir: partial });
    } catch (err) {
      throw new BackupRefusedError(
        `its data directory does not open (${(err instanceof Error ? err.message : String(err)).split('\n')[0]})`,
      );
    }
    try {
      await assertAttestDatabase(pglite);
    } finally {
      await pglite.close();
    }
    renameSync(partial, join(dir, PG_DIR));
  } catch (err) {
    rmSync(partial, { recursive: true, force: true });
    throw err;
  } finally {
    rmSync(lockPath, { force: true });
  }
}

/** Refuses a database that is not attest's: no migrations table, no shipped migration, no tables. */
async function assertAttestDatabase(pglite: PGlite): Promise<void> {
  const { migrationStatus } = await import('./migrate.js');
  const db = drizzlePglite(pglite, { schema }) as unknown as Database;
  const status = await migrationStatus(db);
  if (!status[0]?.applied)
    throw new BackupRefusedError(
      "it holds a PostgreSQL database, but not attest's (no attest migration was applied to it)",
    );
  const { rows } = await pglite.query<{ present: boolean }>(
    "select to_regclass('public.api_keys') is not null and to_regclass('public.attestation_sessions') is not null as present",
  );
  if (!rows[0]?.present)
    throw new BackupRefusedError("it holds a PostgreSQL database, but not attest's tables");
}

/**
 * An in-memory PGlite: tests only. `template` is a `dumpDataDir()` tar to start from instead of
 * running initdb (most of PGlite's start-up cost).
 */
export async function openMemoryDatabase(
  template?: Blob,
): Promise<DatabaseHandle & { pglite: PGlite }> {
  const pglite = await PGlite.create(template ? { loadDataDir: template } : {});
  return {
    db: drizzlePglite(pglite, { schema }) as unknown as Database,
    pglite,
    kind: 'embedded',
    where: 'memory',
    connectTimeoutSeconds: DEFAULT_CONNECT_TIMEOUT_SECONDS,
    close: () => pglite.close(),
  };
}

/** postgres-js and its drizzle driver, loaded only where a PostgreSQL connection is made. */
async function postgresDriver() {
  const [{ default: postgres }, { drizzle }] = await Promise.all([
    import('postgres'),
    import('drizzle-orm/postgres-js'),
  ]);
  return { postgres, drizzlePostgres: drizzle };
}

async function openPostgres(
  url: string,
  max: number,
  server: boolean,
  connectTimeoutSeconds: number,
): Promise<DatabaseHandle> {
  const { postgres, drizzlePostgres } = await postgresDriver();
  const connect = () =>
    postgres(url, {
      max,
      connect_timeout: connectTimeoutSeconds,
      idle_timeout: 60,
      max_lifetime: 30 * 60,
      // notice a peer that vanished without a reset sooner than the 60 s default
      keep_alive: 10,
      // postgres.js waits up to 20 s between reconnects after a few failed ones (3^n / 100 s):
      // after an outage the pool would stay down that long after the database is back
      backoff: reconnectDelaySeconds,
      onnotice: () => {},
      // a statement that hangs must not hold a connection beyond the request deadline
      connection: { application_name: 'attest', ...(server ? { statement_timeout: 5000 } : {}) },
    });
  const unguard = guardDriverRejections();
  let client = connect();
  let current = drizzlePostgres(preparedStatements(client), { schema });
  // notifications have a connection of their own, outside the pool `recycle` replaces
  let listener: Sql | undefined;
  // repositories keep this object; `recycle` swaps what it forwards to
  const db = new Proxy({} as typeof current, {
    get: (_, key) => Reflect.get(current, key, current),
  });
  return {
    db: db as unknown as Database,
    kind: 'postgres',
    where: redactUrl(url),
    url,
    connectTimeoutSeconds,
    async recycle() {
      const stale = client;
      client = connect();
      current = drizzlePostgres(preparedStatements(client), { schema });
      // timeout 0: sockets whose peer vanished would never answer a graceful end
      await stale.end({ timeout: 0 }).catch(() => {});
    },
    async probe(timeoutMs) {
      const probe = postgres(url, {
        max: 1,
        connect_timeout: Math.max(1, Math.ceil(timeoutMs / 1000)),
        // no array-type query at connect: nothing of the driver's own is left to reject unhandled
        fetch_types: false,
        onnotice: () => {},
        connection: { application_name: 'attest-probe' },
      });
      try {
        await lagAwareDeadline(
          probe`select 1`.then(() => {}),
          timeoutMs,
        );
      } finally {
        probe.end({ timeout: 0 }).catch(() => {});
      }
    },
    async listen(channel, onNotify, onListen) {
      listener ??= postgres(url, {
        max: 1,
        connect_timeout: connectTimeoutSeconds,
        keep_alive: 10,
        onnotice: () => {},
        connection: { application_name: 'attest-listen' },
      });
      await listener.listen(channel, onNotify, onListen);
    },
    async close() {
      try {
        await Promise.all([client.end({ timeout: 5 }), listener?.end({ timeout: 1 })]);
      } finally {
        unguard();
      }
    },
  };
}

/** postgres.js's wait before reconnecting after `retries` failed attempts: at most 0.5 s. */
function reconnectDelaySeconds(retries: number): number {
  return (0.5 + Math.random() / 2) * Math.min(0.05 * 2 ** retries, 0.5);
}

/**
 * drizzle runs `db.execute(sql...)` unprepared, and postgres.js then sends a Parse/Describe and
 * waits for its answer before every statement: two round trips (and two socket writes) per query.
 * The repositories' statements are few and fixed, so each connection prepares each one once and
 * later calls only bind and execute.
 */
function preparedStatements(client: Sql): Sql {
  const unsafe: Sql['unsafe'] = (query, parameters, options) =>
    client.unsafe(query, parameters, { ...options, prepare: true });
  return new Proxy(client, {
    get: (target, key) => (key === 'unsafe' ? unsafe : Reflect.get(target, key)),
  });
}

/** Rows of a raw `db.execute` result on either driver. */
export function rowsOf<T>(result: unknown): T[] {
  if (Array.isArray(result)) return result as T[];
  return ((result as { rows?: T[] }).rows ?? []) as T[];
}
