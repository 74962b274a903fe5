import { Fault } from '../core/fault.js';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
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
import { assertPrivate } from './runningServer.js';
import { redactUrl } from './redactUrl.js';
import { tables as schema } from './tables.js';
import type { Database, DatabaseHandle } from './database.js';
import { processName } from './processName.js';
import { clusterExists, createCluster, PG_DIR, PGLITE_DIR } from './embeddedServer.js';
import {
  superviseServer,
  type EmbeddedEvent,
  type SupervisedServer,
} from './embeddedSupervisor.js';
import { postgresTarget } from './postgresUrl.js';
import { guardDriverRejections } from './driverRejections.js';
import { planConnections, type ChangeFeedSetting, type ConnectionPlan } from './poolerProbe.js';
import { reservedBegin, TRANSACTION_POOLED_OPTIONS } from './transactionPooling.js';
import { lagAwareDeadline } from './lagAwareDeadline.js';
import { boundDatabaseWait, type DatabaseProgress } from './databaseDeadline.js';

export interface OpenOptions {
  /** a postgres:// URL; when absent the embedded database in `dataDir` is started and used */
  url?: string | undefined;
  dataDir: string;
  /**
   * `server`: owns the embedded database (and announces its admin socket in the lock file).
   * `cli`: opens the directory itself; refused while another process holds it.
   */
  role: 'server' | 'cli';
  /** pool size for PostgreSQL */
  poolSize?: number;
  /**
   * ATTEST_CHANGE_FEED for a server on a PostgreSQL URL: `auto` probes whether connections keep
   * their session (poolerProbe.ts), and an unreachable server fails the open; unset, nothing is
   * probed and the pool connects lazily, as a direct connection. The embedded server is never
   * probed (no pooler stands between). The CLI never prepares statements.
   */
  changeFeed?: ChangeFeedSetting;
  /** seconds a connection may take to be ready (default 10) */
  connectTimeoutSeconds?: number;
  /** false: refuse, rather than create, an embedded database that does not exist yet (default true) */
  create?: boolean;
  /** told what takes time while it happens (creating the embedded database) */
  onProgress?: (message: string) => void;
  /** told of a lock left by a process that is gone, removed before the embedded database opened */
  onStaleLock?: (stale: StaleLock) => void;
  /** told of an embedded PostgreSQL server left running by an attest that is gone, stopped before a new one started */
  onOrphan?: (pid: number) => void;
  /** told when the embedded server exits unasked, is started again, or is given up */
  onEmbeddedEvent?: (event: EmbeddedEvent) => void;
  /** XDG_RUNTIME_DIR: where the embedded server's private socket folder goes (else the OS temporary folder) */
  runtimeDir?: string | undefined;
  /**
   * told when the driver threw on a closed connection (isNullSocketWrite) and the pool was
   * replaced rather than the process ended
   */
  onDriverFault?: (fault: Error) => void;
}

export const DEFAULT_CONNECT_TIMEOUT_SECONDS = 10;

/** The embedded database is held by another live process. */
export class DatabaseBusyError extends Fault {
  override readonly name = 'DatabaseBusyError';
  constructor(message: string) {
    super('database_busy', message, { exit: 3 });
  }
}

/** There is no embedded database where one was expected, and the caller may not create one. */
export class DatabaseMissingError extends Fault {
  override readonly name = 'DatabaseMissingError';
  constructor(message: string) {
    super('database_missing', message, { exit: 3 });
  }
}

/** The data dir holds a database of attest's earlier embedded engine (PGlite): not opened, not touched. */
export class OldEngineError extends Fault {
  override readonly name = 'OldEngineError';
  constructor(message: string) {
    super('old_engine', message);
  }
}

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
  const pool = {
    max: options.poolSize ?? POOL_SIZE,
    role: options.role,
    connectTimeoutSeconds,
    ...(options.onDriverFault ? { onDriverFault: options.onDriverFault } : {}),
  };
  if (options.url)
    return await openPostgres(options.url, { ...pool, changeFeed: options.changeFeed ?? null });
  const dataDir = resolve(options.dataDir);
  if (existsSync(dataDir)) assertPrivate(dataDir);
  refuseOldEngine(dataDir);
  const exists = clusterExists(dataDir);
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
  try {
    acquireLock(lockPath, (message) => new DatabaseBusyError(message));
  } catch (err) {
    throw embeddedUnavailable(dataDir, err);
  }
  let server: SupervisedServer | undefined;
  let handle: DatabaseHandle;
  try {
    if (!exists) {
      options.onProgress?.(`creating the embedded database in ${options.dataDir}…`);
      createCluster(dataDir);
    }
    server = await superviseServer(dataDir, {
      runtimeDir: options.runtimeDir,
      ...(options.onOrphan ? { onOrphan: options.onOrphan } : {}),
      ...(options.onEmbeddedEvent ? { onEvent: options.onEmbeddedEvent } : {}),
    });
    // no pooler stands between this process and the server it owns: nothing to probe
    handle = await openPostgres(server.url, {
      ...pool,
      changeFeed: options.changeFeed === 'poll' ? 'poll' : null,
    });
  } catch (err) {
    await server?.stop().catch(() => {});
    rmSync(lockPath, { force: true });
    throw embeddedUnavailable(dataDir, err);
  }
  const running = server;
  return {
    ...handle,
    kind: 'embedded',
    where: dataDir,
    dataDir,
    failed: running.failed,
    ...(options.role === 'server'
      ? {
          announce(admin: AdminDoor) {
            announceInLock(lockPath, admin);
          },
        }
      : {}),
    async close() {
      // the server stops and the lock goes even when the pool fails to close
      try {
        await handle.close();
      } finally {
        try {
          await running.stop();
        } finally {
          rmSync(lockPath, { force: true });
        }
      }
    },
  };
}

/**
 * A data dir of the earlier engine (PGlite, PostgreSQL 17 in WebAssembly) is refused, never
 * opened nor replaced: its files are not readable by this engine.
 */
function refuseOldEngine(dataDir: string): void {
  if (!existsSync(join(dataDir, PGLITE_DIR, 'PG_VERSION')) || clusterExists(dataDir)) return;
  throw new OldEngineError(
    `${dataDir} holds a database of attest's earlier embedded engine (PGlite, in ${PGLITE_DIR}/), which this version cannot read: run "attest db backup" with the earlier version, or move ${join(dataDir, PGLITE_DIR)} away to start afresh`,
  );
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
  options: {
    max: number;
    role: 'server' | 'cli';
    connectTimeoutSeconds: number;
    onDriverFault?: (fault: Error) => void;
    /** null: not probed, connections taken to keep their session (the embedded server, tests) */
    changeFeed: ChangeFeedSetting | null;
  },
): Promise<DatabaseHandle> {
  const { max, connectTimeoutSeconds, onDriverFault } = options;
  const { postgres, drizzlePostgres } = await postgresDriver();
  // when the pool last got an answer: a wait past its deadline while others are answered is a
  // busy database, not a silent one (databaseDeadline.ts)
  const progress: DatabaseProgress = { lastAnswerAt: performance.now() };
  const target = postgresTarget(url);
  const socket = target.options;
  const plan = await connectionPlan(options.role, options.changeFeed, (extra) =>
    postgres(target.url, { ...socket, connect_timeout: connectTimeoutSeconds, ...extra }),
  );
  const connect = () =>
    postgres(target.url, {
      ...socket,
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
      ...(plan.transactionPooled ? TRANSACTION_POOLED_OPTIONS : {}),
      connection: {
        application_name: 'attest',
        // a statement that hangs must not hold a connection beyond the request deadline (the
        // server role's plan, where the server takes it at connection start)
        ...(plan.startupTimeout ? { statement_timeout: 5000 } : {}),
      },
    });
  const orm = (sql: Sql, deadlineMs?: number) =>
    drizzlePostgres(preparedStatements(sql, progress, !plan.transactionPooled, deadlineMs), {
      schema,
    });
  let client = connect();
  type Orm = ReturnType<typeof orm>;
  /**
   * What repositories keep: one object per statement deadline (undefined: none; a number:
   * DatabaseHandle.bounded), forwarding to a drizzle over the current pool, which `recycle` swaps
   */
  const views = new Map<number | undefined, { current: Orm; db: Database }>();
  const view = (ms: number | undefined): Database => {
    let entry = views.get(ms);
    if (!entry) {
      const made: { current: Orm; db: Database } = {
        current: orm(client, ms),
        db: new Proxy({} as Orm, {
          get: (_, key) => Reflect.get(made.current, key, made.current),
        }) as unknown as Database,
      };
      views.set(ms, made);
      entry = made;
    }
    return entry.db;
  };
  const recycle = async () => {
    const stale = client;
    client = connect();
    for (const [ms, made] of views) made.current = orm(client, ms);
    // timeout 0: sockets whose peer vanished would never answer a graceful end
    await stale.end({ timeout: 0 }).catch(() => {});
  };
  const unguard = guardDriverRejections((fault) => {
    onDriverFault?.(fault);
    void recycle();
  });
  /** `work` on a connection of its own, outside the pool, within `timeoutMs` (lag-aware) */
  const fresh = async <T>(timeoutMs: number, work: (sql: Sql) => Promise<T>): Promise<T> => {
    const single = postgres(target.url, {
      ...socket,
      max: 1,
      connect_timeout: Math.max(1, Math.ceil(timeoutMs / 1000)),
      // no array-type query at connect: nothing of the driver's own is left to reject unhandled
      fetch_types: false,
      onnotice: () => {},
      connection: { application_name: 'attest-probe' },
    });
    try {
      return await lagAwareDeadline(work(single), timeoutMs);
    } finally {
      single.end({ timeout: 0 }).catch(() => {});
    }
  };
  // notifications have a connection of their own, outside the pool `recycle` replaces
  let listener: Sql | undefined;
  return {
    db: view(undefined),
    bounded: view,
    kind: 'postgres',
    where: redactUrl(url),
    url,
    connectTimeoutSeconds,
    connections: plan,
    recycle,
    async probe(timeoutMs) {
      await fresh(timeoutMs, async (sql) => {
        await sql`select 1`;
      });
    },
    async commitsAwaitingStandby(timeoutMs) {
      return await fresh(timeoutMs, async (sql) => {
        const [row] = await sql<{ n: number }[]>`
          select count(*)::int as n from pg_stat_activity
          where wait_event = 'SyncRep' and application_name = 'attest'`;
        return row?.n ?? 0;
      });
    },
    async listen(channel, onNotify, onListen) {
      listener ??= postgres(target.url, {
        ...socket,
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

/**
 * The server role probes the connections (poolerProbe.ts); the CLI runs a few statements per
 * command, unnamed and one at a time, so it works through any pooler without asking.
 */
async function connectionPlan(
  role: 'server' | 'cli',
  setting: ChangeFeedSetting | null,
  connect: Parameters<typeof planConnections>[0],
): Promise<ConnectionPlan> {
  if (role === 'cli')
    return { feed: 'notify', why: 'the CLI', startupTimeout: false, transactionPooled: true };
  if (setting === null)
    return { feed: 'notify', why: 'not probed', startupTimeout: true, transactionPooled: false };
  return await planConnections(connect, setting);
}

/** postgres.js's wait before reconnecting after `retries` failed attempts: at most 0.5 s. */
function reconnectDelaySeconds(retries: number): number {
  return (0.5 + Math.random() / 2) * Math.min(0.05 * 2 ** retries, 0.5);
}

/**
 * drizzle runs `db.execute(sql...)` unprepared, and postgres.js then sends a Parse/Describe and
 * waits for its answer before every statement: two round trips (and two socket writes) per query.
 * The repositories' statements are few and fixed, so each connection prepares each one once and
 * later calls only bind and execute. Not behind a pooler in transaction mode (`prepare` false):
 * a statement prepared on one server connection is unknown to the next.
 */
function preparedStatements(
  client: Sql,
  progress: DatabaseProgress,
  prepare: boolean,
  /** each statement's wait for its answer (DatabaseHandle.bounded); absent: unbounded */
  deadlineMs: number | undefined,
): Sql {
  const unsafe = ((query: string, parameters?: never[], options?: object) => {
    const pending = client.unsafe(query, parameters, { ...options, prepare });
    return deadlineMs === undefined ? pending : deadlined(pending, deadlineMs, progress);
  }) as Sql['unsafe'];
  const begin = prepare ? undefined : reservedBegin(client);
  return new Proxy(client, {
    get: (target, key) =>
      key === 'unsafe' ? unsafe : key === 'begin' && begin ? begin : Reflect.get(target, key),
  });
}

/**
 * A postgres.js query whose awaiting is bounded by `ms` (DatabaseHandle.bounded): postgres.js has no
 * client-side timeout, and a connection whose peer went silent holds its queries forever. The
 * query is lazy (it runs when awaited), so `values()` still reaches it before it runs; the query
 * itself stays on its connection (the pool watchdog replaces a pool whose queries time out).
 */
function deadlined<T>(
  pending: T & PromiseLike<unknown> & { values(): unknown },
  ms: number,
  progress: DatabaseProgress,
): T {
  let bounded: Promise<unknown> | undefined;
  const run = () =>
    (bounded ??= boundDatabaseWait(
      Promise.resolve(pending).finally(() => (progress.lastAnswerAt = performance.now())),
      ms,
      progress,
    ));
  const wrapper = {
    values() {
      pending.values();
      return wrapper;
    },
    then: (ok?: (v: unknown) => unknown, fail?: (e: unknown) => unknown) => run().then(ok, fail),
    catch: (fail?: (e: unknown) => unknown) => run().catch(fail),
    finally: (done?: () => void) => run().finally(done),
  };
  return wrapper as unknown as T;
}
