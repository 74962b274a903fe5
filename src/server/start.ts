import type { X509Certificate } from 'node:crypto';
import type { Server } from 'node:http';
import type { Logger } from 'pino';
import type { EmbeddedEvent } from '../db/embeddedSupervisor.js';
import { ConfigError, type Config } from '../config.js';
import { peculiarX509 } from '../core/apple/peculiarX509.js';
import { configuredAppleRoots } from '../configuredAppleRoots.js';
import { createRevocationRepository } from '../db/androidRevocations.js';
import { configuredAndroidRoots } from '../configuredAndroidRoots.js';
import { startChangeFeed, type ChangeFeed } from '../db/changeFeed.js';
import { DEFAULT_CONNECT_TIMEOUT_SECONDS, openDatabase } from '../db/client.js';
import { redactUrl } from '../db/redactUrl.js';
import type { DatabaseHandle } from '../db/database.js';
import { embeddedUnavailable, isConnectionError, unavailable } from '../db/errors.js';
import { resolveMasterKey, type ResolvedMasterKey } from '../db/masterKey.js';
import { assertMigrated, runMigrations } from '../db/migrate.js';
import { createSecretBox, type SecretBox } from '../db/secretBox.js';
import { checkMasterKey } from '../db/secrets.js';
import { describeFault } from './app.js';
import { createMetricsApp } from './metrics.js';
import { drainable, type Drainable } from './drainable.js';
import { assertPortFree, closeServer, listen, portOf, urlOf } from './httpListen.js';
import { PROPAGATION_MS } from './propagation.js';
import { startAdmin } from './startAdmin.js';
import { startJobs } from './startJobs.js';
import { startStats, type StatsOptions } from './startStats.js';
import { wireApp } from './wireApp.js';
import type { Balancing } from '../workers.js';

export interface RunningServer {
  url: string;
  port: number;
  /** `serve --workers`: how the workers share the port (src/workers.ts) */
  balancing?: Balancing;
  /** where /metrics is served when ATTEST_METRICS_PORT is set */
  metricsUrl?: string;
  database: DatabaseHandle;
  /** the master key in use (its id and where it came from; `created` when made just now) */
  masterKey: Omit<ResolvedMasterKey, 'key'> & { id: string };
  /**
   * Makes the next request re-read API keys, the allowlist (with its Play Integrity credentials)
   * and the development root: call it after a change made in this process or announced by
   * another, so that it applies at once rather than within PROPAGATION_MS.
   */
  reloadNow(): void;
  /**
   * Resolves when the server cannot go on (its workers keep dying, or the embedded database died
   * and did not come back); the caller closes it and exits non-zero
   */
  failed?: Promise<Error>;
  close(): Promise<void>;
}

/**
 * On close, requests in flight have this long to be answered (their own deadline is 5 s) before
 * the connections still open are cut; the database closes after.
 */
export const DRAIN_MS = 5000;

export interface StartOptions extends StatsOptions {
  migrate: boolean;
  onProgress?: (message: string) => void;
  pruneIntervalMs?: number;
  receiptRefreshIntervalMs?: number;
  /** the fallback re-read interval (default PROPAGATION_MS); tests lengthen it to see notifications alone */
  propagationMs?: number;
  /** told after each reload a PostgreSQL notification caused (the payload names the table) */
  onChange?: (table: string) => void;
  /**
   * The issuer of result tokens instead of ATTEST_ISSUER: `attest dev up` passes a function
   * giving its own URL, known only once it listens (http on loopback: see isIssuer).
   */
  ownIssuer?: () => string;
}

/**
 * Opens the database, migrates (unless told not to), wires the app and listens.
 * Used by `attest serve` and by the tests that need a real socket.
 */
export async function startServer(
  config: Config,
  logger: Logger,
  options: StartOptions,
): Promise<RunningServer> {
  const appleRoots = configuredAppleRoots(config.appleRootCaPath);
  // read before the database opens: a bad file is a configuration error, not a half-started server
  configuredAndroidRoots(config.androidRootCaPath);
  if (config.androidRootCaPath) {
    logger.warn(
      { path: config.androidRootCaPath },
      "ATTEST_ANDROID_ROOT_CA is set: android-key trusts these root keys instead of Google's",
    );
  }
  if (config.appleRootCaPath) {
    logger.warn(
      { path: config.appleRootCaPath, roots: appleRoots.length },
      'ATTEST_APPLE_ROOT_CA is set: App Attest trusts these roots instead of the built-in Apple root',
    );
  }

  // a port in use is the commonest start-up failure: find it before loading the database
  if (config.port !== 0) await assertPortFree(config.port, config.host);
  const database = await openDatabase({
    url: config.databaseUrl,
    dataDir: config.dataDir,
    role: 'server',
    changeFeed: config.changeFeed,
    connectTimeoutSeconds: config.dbConnectTimeoutSeconds,
    ...(options.onProgress ? { onProgress: options.onProgress } : {}),
    runtimeDir: config.socketDir,
    onEmbeddedEvent: (event) => logEmbeddedEvent(logger, event),
    onStaleLock: ({ path, pid, why }) =>
      logger.warn({ lock: path, pid }, `removed a stale lock ${path} (pid ${pid}): ${why}`),
    onDriverFault: (fault) =>
      logger.error(
        { err: describeFault(fault) },
        'the database driver failed on a closed connection (postgres.js nextWrite): the pool is replaced',
      ),
  }).catch((err: unknown) => {
    // a PostgreSQL URL's connections are probed as it opens: an unreachable server fails there
    if (config.databaseUrl && isConnectionError(err))
      throw unavailable(redactUrl(config.databaseUrl), err, {
        connectTimeoutSeconds: config.dbConnectTimeoutSeconds ?? DEFAULT_CONNECT_TIMEOUT_SECONDS,
      });
    throw err;
  });
  // whatever fails from here on, the database (its lock and socket) is released before the error
  try {
    if ((config.workers ?? 1) > 1) {
      // the cluster's code loads only when there is a cluster
      const { serveCluster } = await import('./serveCluster.js');
      return await serveCluster(database, appleRoots, config, logger, options);
    }
    return await serveOn(database, appleRoots, config, logger, options);
  } catch (err) {
    await database.close().catch(() => {});
    // a full disk shows as PGlite failing on its first write: name the disk, not "unreachable"
    if (database.kind === 'embedded') err = embeddedUnavailable(database.where, err);
    if (isConnectionError(err)) {
      throw unavailable(database.where, err, {
        connectTimeoutSeconds: database.connectTimeoutSeconds,
        embedded: database.kind !== 'postgres',
      });
    }
    throw err;
  }
}

async function serveOn(
  database: DatabaseHandle,
  appleRoots: readonly X509Certificate[],
  config: Config,
  logger: Logger,
  options: StartOptions,
): Promise<RunningServer> {
  const propagationMs = options.propagationMs ?? PROPAGATION_MS;
  const { masterKey, box } = await prepareDatabase(database, config, logger, options);
  const wired = await wireApp(database, box, appleRoots, config, logger, {
    ...options,
    propagationMs,
    runsJobs: true,
    stats: (allowlist, onWriteError) =>
      startStats(database, config, logger, allowlist, { ...options, propagationMs, onWriteError }),
  });
  const { app, stats, breaker, reloadNow, reload } = wired;
  // every instance hears of changes made anywhere (the change_notify migration's triggers); a
  // (re)connected LISTEN, or a poll after failed ones, reloads too: what came meanwhile is lost
  const feed = await startFeed(database, logger, reloadNow, options.onChange);
  // the embedded database has no other door: the CLI's commands run here, through the admin API
  const admin = database.announce ? await startAdmin(database, config, logger, box, reload) : null;

  // a failure from here on is released by startServer, which closes the database
  let server: Server;
  try {
    server = await listen(app.fetch, config.port, config.host, SERVER_OPTIONS);
  } catch (err) {
    await admin?.stop();
    await feed?.stop();
    throw err;
  }
  server.maxHeadersCount = 100;
  const api = drainable(server);
  const url = urlOf(server, config.host, config.port);
  logger.info(
    { url, database: database.kind, where: database.where, changeFeed: feed?.mode ?? 'none' },
    'listening',
  );

  let metrics: { server: Drainable; url: string } | undefined;
  try {
    metrics = await listenMetrics(config, logger, () => wired.metrics.registry.metrics());
  } catch (err) {
    await closeServer(server);
    await admin?.stop();
    await feed?.stop();
    throw err;
  }

  // its schedule starts once nothing can fail the start any more (close() stops it); what was
  // counted before is written by its first flush
  stats.recorder?.start();
  const jobs = startJobs(database, box, config, logger, wired, options);

  // loaded once the socket listens rather than before: the first attestation finds it ready
  setImmediate(peculiarX509).unref();

  return {
    url,
    port: portOf(server, config.port),
    ...(metrics ? { metricsUrl: metrics.url } : {}),
    database,
    masterKey: {
      id: masterKey.key.id,
      source: masterKey.source,
      created: masterKey.created,
      ...(masterKey.defaultFile ? { defaultFile: masterKey.defaultFile } : {}),
    },
    reloadNow,
    ...(database.failed ? { failed: database.failed } : {}),
    async close() {
      // the drain starts at once: no new connection, and every answer from now says Connection: close
      const drained = Promise.all([api.drain(DRAIN_MS), metrics?.server.drain(DRAIN_MS)]);
      await jobs.stop();
      await Promise.all([drained, admin?.stop(), feed?.stop()]);
      // after the drain: the last answers are counted; a crash would lose at most the last interval
      await stats.recorder?.stop();
      // the captures of the last answers (at most a few writes, each one statement)
      await wired.capturer?.idle();
      await wired.telemetry?.shutdown();
      breaker?.stop();
      await database.close();
    },
  };
}

/**
 * The master key, the migrations (unless told not to) and the checks that the schema is current
 * and the key is the one the secrets were sealed with: what every process does before it serves.
 */
export async function prepareDatabase(
  database: DatabaseHandle,
  config: Config,
  logger: Logger,
  options: Pick<StartOptions, 'migrate' | 'onProgress'>,
): Promise<{ masterKey: ResolvedMasterKey; box: SecretBox }> {
  // a created key is said once, by the command (RunningServer.masterKey.created)
  const masterKey = await resolveMasterKey(config, database);
  const box = createSecretBox([masterKey.key]);
  if (options.migrate) {
    const { applied, sealed } = await runMigrations(database, {
      ...(options.onProgress ? { onProgress: options.onProgress } : {}),
      secrets: { box, source: masterKey.source },
    });
    if (applied > 0) logger.info({ applied }, 'migrations applied');
    if (sealed > 0)
      logger.info({ sealed, keyId: box.keyId }, 'secrets stored in clear were sealed');
  }
  await assertMigrated(database);
  // a wrong key fails here, once, rather than as gms_decrypt_failed on every token
  await checkMasterKey(database.db, box, { source: masterKey.source });
  // a new database starts from the snapshot shipped with this build
  await createRevocationRepository(database.db).seed();
  return { masterKey, box };
}

/**
 * Hears of the changes made on the database by any process (the change feed: LISTEN, or polling
 * behind a pooler in transaction mode) and says which feed it chose and why.
 */
export async function startFeed(
  database: DatabaseHandle,
  logger: Logger,
  reloadNow: () => void,
  onChange?: (table: string) => void,
  onResync?: () => void,
): Promise<ChangeFeed | null> {
  const feed = await startChangeFeed(
    database,
    {
      onChange: (table) => {
        reloadNow();
        onChange?.(table);
      },
      onResync: () => {
        reloadNow();
        onResync?.();
      },
    },
    {
      onPollError: (err) =>
        logger.warn(
          { err: describeFault(err) },
          'the change feed could not read attest_changes: changes made elsewhere apply once it can (every cached item is re-read then)',
        ),
    },
  );
  if (feed && database.connections)
    logger.info({ changeFeed: feed.mode, why: database.connections.why }, 'change feed');
  return feed;
}

/**
 * Slow clients must not hold sockets: whole request within 10 s, headers within 5 s. Node checks
 * those limits only every connectionsCheckingInterval (30 s by default): check every second.
 */
export const SERVER_OPTIONS = {
  requestTimeout: 10_000,
  headersTimeout: 5_000,
  keepAliveTimeout: 5_000,
  connectionsCheckingInterval: 1_000,
};

/** /metrics on a listener of its own when ATTEST_METRICS_PORT is set (else undefined). */
export async function listenMetrics(
  config: Config,
  logger: Logger,
  scrape: () => Promise<string>,
): Promise<{ server: Drainable; url: string } | undefined> {
  if (config.metricsPort === undefined) return undefined;
  let listening: Server;
  try {
    listening = await listen(
      createMetricsApp(scrape).fetch,
      config.metricsPort,
      config.metricsHost,
      SERVER_OPTIONS,
    );
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    throw new Error(
      e.code === 'EADDRINUSE'
        ? `metrics port ${config.metricsPort} on ${config.metricsHost} is in use: pick another with --metrics-port or ATTEST_METRICS_PORT`
        : `cannot serve metrics on ${config.metricsHost}:${config.metricsPort}: ${e.message}`,
    );
  }
  const url = `${urlOf(listening, config.metricsHost, config.metricsPort)}/metrics`;
  logger.info({ url }, 'metrics listening');
  return { server: drainable(listening), url };
}

/** `--workers` above 1 on a database that takes one process only. */
export function embeddedRefusesWorkers(workers: number): ConfigError {
  return new ConfigError(
    `--workers ${workers} needs a database that takes several connections, and the embedded one takes one process only: set DATABASE_URL to a PostgreSQL database, or serve with --workers 1`,
  );
}

/** One log line for each thing that happens to the embedded database's server process. */
function logEmbeddedEvent(logger: Logger, e: EmbeddedEvent): void {
  switch (e.event) {
    case 'exited':
      logger.error(
        { postgresPid: e.pid, exitCode: e.code, signal: e.signal },
        `the embedded database's server exited unasked (${e.signal ? `signal ${e.signal}` : `exit code ${e.code}`}): starting it again; requests answer "database unavailable" meanwhile`,
      );
      return;
    case 'restart-failed':
      logger.warn(
        { err: { message: e.error.message }, attempt: e.attempt, retryInMs: e.retryInMs },
        'the embedded database did not start again: retrying',
      );
      return;
    case 'restarted':
      logger.info(
        { postgresPid: e.pid, downMs: e.downMs, attempts: e.attempts },
        'the embedded database is back',
      );
      return;
    case 'gave-up':
      logger.fatal(
        { err: { message: e.error.message }, downMs: e.downMs },
        'the embedded database did not come back: attest exits so that its supervisor restarts it',
      );
  }
}
