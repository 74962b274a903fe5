import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js';
import type { PgDatabase } from 'drizzle-orm/pg-core';
import postgres from 'postgres';
import * as schema from './schema.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- both drivers' result kinds
export type Database = PgDatabase<any, typeof schema>;

export interface DatabaseHandle {
  db: Database;
  /** `postgres`: a server; `embedded`: PGlite opened here; `embedded-shared`: PGlite of a running `attest serve` */
  kind: 'postgres' | 'embedded' | 'embedded-shared';
  /** where it is, for messages (never a password) */
  where: string;
  /** PostgreSQL only: the connection URL (secret: never print it), for single-connection work */
  url?: string;
  /**
   * PostgreSQL only: replaces the pool with a new one. postgres-js never times a query out, so a
   * pool whose connections lost their peer without a reset (a silent partition) waits forever.
   */
  recycle?(): Promise<void>;
  close(): Promise<void>;
}

export interface OpenOptions {
  /** a postgres:// URL; when absent the embedded database in `dataDir` is used */
  url?: string | undefined;
  dataDir: string;
  /**
   * `server`: owns the embedded database and shares it over a local socket for the CLI.
   * `cli`: uses a running server's socket when there is one, else opens the directory itself.
   */
  role: 'server' | 'cli';
  /** pool size for PostgreSQL */
  poolSize?: number;
}

/** The embedded database is held by another live process that does not share it. */
export class DatabaseBusyError extends Error {
  override readonly name = 'DatabaseBusyError';
}

// PGlite wants a folder of its own: the lock and socket sit beside it
const PG_DIR = 'pgdata';
const LOCK_FILE = 'attest.lock';
const SOCKET_FILE = 'attest.sock';

interface LockInfo {
  pid: number;
  /** unix socket path or host:port of the sharing server, once it listens */
  socket?: { path: string } | { host: string; port: number };
}

/** Opens the configured database (see OpenOptions.role for how the embedded one is shared). */
export async function openDatabase(options: OpenOptions): Promise<DatabaseHandle> {
  if (options.url) return openPostgres(options.url, options.poolSize ?? 10, options.role === 'server');
  const dataDir = resolve(options.dataDir);
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const lockPath = join(dataDir, LOCK_FILE);
  const holder = readLiveLock(lockPath);
  if (holder) {
    if (options.role === 'cli' && holder.socket) return openShared(holder.socket, dataDir);
    throw new DatabaseBusyError(
      `the embedded database in ${dataDir} is in use by process ${holder.pid}` +
        (holder.socket ? '' : ' (another attest command); wait for it to finish') +
        (options.role === 'server' ? '; stop that process or set ATTEST_DATA_DIR to another folder' : ''),
    );
  }
  acquireLock(lockPath);
  let pglite: PGlite | undefined;
  let server: PGLiteSocketServer | undefined;
  try {
    pglite = await PGlite.create({ dataDir: join(dataDir, PG_DIR) });
    if (options.role === 'server') {
      const socketPath = join(dataDir, SOCKET_FILE);
      rmSync(socketPath, { force: true });
      // unix socket paths are limited to ~107 bytes; a long data dir falls back to loopback TCP
      const useUnix = Buffer.byteLength(socketPath) < 100;
      server = new PGLiteSocketServer({
        db: pglite,
        ...(useUnix ? { path: socketPath } : { host: '127.0.0.1', port: 0 }),
        maxConnections: 8,
      });
      await server.start();
      const socket: LockInfo['socket'] = useUnix
        ? { path: socketPath }
        : { host: '127.0.0.1', port: Number(server.getServerConn().split(':').pop()) };
      writeFileSync(lockPath, JSON.stringify({ pid: process.pid, socket } satisfies LockInfo));
    }
  } catch (err) {
    await server?.stop().catch(() => {});
    await pglite?.close().catch(() => {});
    rmSync(lockPath, { force: true });
    throw err;
  }
  const db = drizzlePglite(pglite, { schema }) as unknown as Database;
  const opened = pglite;
  return {
    db,
    kind: 'embedded',
    where: dataDir,
    async close() {
      await server?.stop().catch(() => {});
      await opened.close();
      rmSync(lockPath, { force: true });
      rmSync(join(dataDir, SOCKET_FILE), { force: true });
    },
  };
}

/**
 * An in-memory PGlite: tests only. `template` is a `dumpDataDir()` tar to start from instead of
 * running initdb (most of PGlite's start-up cost).
 */
export async function openMemoryDatabase(template?: Blob): Promise<DatabaseHandle & { pglite: PGlite }> {
  const pglite = await PGlite.create(template ? { loadDataDir: template } : {});
  return {
    db: drizzlePglite(pglite, { schema }) as unknown as Database,
    pglite,
    kind: 'embedded',
    where: 'memory',
    close: () => pglite.close(),
  };
}

function openPostgres(url: string, max: number, server: boolean): DatabaseHandle {
  const connect = () =>
    postgres(url, {
      max,
      connect_timeout: 5,
      idle_timeout: 60,
      max_lifetime: 30 * 60,
      // notice a peer that vanished without a reset sooner than the 60 s default
      keep_alive: 10,
      onnotice: () => {},
      // a statement that hangs must not hold a connection beyond the request deadline
      connection: { application_name: 'attest', ...(server ? { statement_timeout: 5000 } : {}) },
    });
  let client = connect();
  let current = drizzlePostgres(client, { schema });
  // repositories keep this object; `recycle` swaps what it forwards to
  const db = new Proxy({} as typeof current, { get: (_, key) => Reflect.get(current, key, current) });
  return {
    db: db as unknown as Database,
    kind: 'postgres',
    where: redactUrl(url),
    url,
    async recycle() {
      const stale = client;
      client = connect();
      current = drizzlePostgres(client, { schema });
      // timeout 0: sockets whose peer vanished would never answer a graceful end
      await stale.end({ timeout: 0 }).catch(() => {});
    },
    close: () => client.end({ timeout: 5 }),
  };
}

function openShared(socket: NonNullable<LockInfo['socket']>, dataDir: string): DatabaseHandle {
  const client = postgres({
    ...('path' in socket ? { path: socket.path } : { host: socket.host, port: socket.port }),
    username: 'postgres',
    database: 'postgres',
    max: 1,
    connect_timeout: 5,
    onnotice: () => {},
  });
  return {
    db: drizzlePostgres(client, { schema }) as unknown as Database,
    kind: 'embedded-shared',
    where: `${dataDir} (through the running server)`,
    close: () => client.end({ timeout: 5 }),
  };
}

function readLiveLock(lockPath: string): LockInfo | null {
  let info: LockInfo;
  try {
    info = JSON.parse(readFileSync(lockPath, 'utf8')) as LockInfo;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    // half-written by a process that is starting: treat as held, not as stale
    return { pid: 0 };
  }
  if (!Number.isInteger(info.pid) || info.pid <= 0) return { pid: 0 };
  if (info.pid === process.pid || isAlive(info.pid)) return info;
  rmSync(lockPath, { force: true }); // stale: its process died without cleaning up
  return null;
}

function acquireLock(lockPath: string): void {
  let fd: number;
  try {
    fd = openSync(lockPath, 'wx', 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') {
      throw new DatabaseBusyError(`the embedded database lock ${lockPath} was taken by another process just now; try again`);
    }
    throw err;
  }
  writeSync(fd, JSON.stringify({ pid: process.pid } satisfies LockInfo));
  closeSync(fd);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** A URL without its password, for messages and logs. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return 'postgres://(unparseable URL)';
  }
}

/** Rows of a raw `db.execute` result on either driver. */
export function rowsOf<T>(result: unknown): T[] {
  if (Array.isArray(result)) return result as T[];
  return ((result as { rows?: T[] }).rows ?? []) as T[];
}
