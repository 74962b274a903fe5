import type { X509Certificate } from 'node:crypto';
import type { Server } from 'node:http';
import type { Logger } from 'pino';
import { androidRevocationUrl, type Config } from '../config.js';
import { peculiarX509 } from '../core/apple/peculiarX509.js';
import { verifyToken } from '../core/verify.js';
import { configuredAppleRoots, configuredReceiptRoots } from '../configuredAppleRoots.js';
import { createReceiptVerifier } from '../core/apple/verifyReceipt.js';
import { createReceiptClient } from '../apple/receiptClient.js';
import { createAppleCredentialRepository } from '../db/appleCredentials.js';
import { createReceiptRefreshQueue } from '../db/receiptRefreshQueue.js';
import { createReceiptRefresher, startReceiptRefresher } from './receiptRefresher.js';
import { createAllowlistRepository, createCachedAllowlist } from '../db/allowlist.js';
import { createApiKeyRepository } from '../db/apiKeys.js';
import { createAppleKeyRepository } from '../db/appleKeys.js';
import { createAndroidKeyRepository } from '../db/androidKeys.js';
import { createDeviceVelocityRepository } from '../db/deviceVelocity.js';
import { createRevocationRepository, createRevocationSource } from '../db/androidRevocations.js';
import { configuredAndroidRoots } from '../configuredAndroidRoots.js';
import { checkRevocationAge, startAgeCheck, startRevocationRefresh } from './revocationRefresh.js';
import { openDatabase, type DatabaseHandle } from '../db/client.js';
import { embeddedUnavailable, isConnectionError, unavailable } from '../db/errors.js';
import { resolveMasterKey, type ResolvedMasterKey } from '../db/masterKey.js';
import { createDevCaRepository } from '../db/devCa.js';
import { assertMigrated, migrationStatus, runMigrations } from '../db/migrate.js';
import { createPoolWatchdog } from '../db/poolWatchdog.js';
import { createDatabaseBreaker } from '../db/databaseBreaker.js';
import { createSecretBox } from '../db/secretBox.js';
import { checkMasterKey } from '../db/secrets.js';
import { createSessionRepository } from '../db/sessions.js';
import { createConsumedResultRepository } from '../db/consumedResults.js';
import { createResultConsumer } from './resultConsumer.js';
import { startConsumedResultPruner } from './consumedResultPruner.js';
import { createApiKeyAuthenticator } from './apiKeyAuthenticator.js';
import { createPlayIntegrityClient } from '../google/playIntegrityClient.js';
import { KeyCache } from '../core/google/keyCache.js';
import { createApp, describeFault } from './app.js';
import { createMetrics, createMetricsApp } from './metrics.js';
import { startSessionPruner } from './sessionPruner.js';
import { createModeVerifiers } from './modeVerifiers.js';
import { allowlistedApp } from './allowlistedApp.js';
import { createDeviceRecallWrite } from './deviceRecall.js';
import { drainable, type Drainable } from './drainable.js';
import { assertPortFree, closeServer, listen, portOf, urlOf } from './httpListen.js';
import { reportingKeyFailures } from './reportingKeyFailures.js';
import { PROPAGATION_MS } from './propagation.js';
import { resultTokenSigners } from './resultTokenSigners.js';
import { startAdmin } from './startAdmin.js';
import { startStats, type StatsOptions } from './startStats.js';

export interface RunningServer {
  url: string;
  port: number;
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
  close(): Promise<void>;
}

/** The channel on which PostgreSQL announces key, allowlist, credential and development CA changes (migration 0006). */
export const CHANGES_CHANNEL = 'attest_changes';

export { PROPAGATION_MS } from './propagation.js';

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
    connectTimeoutSeconds: config.dbConnectTimeoutSeconds,
    ...(options.onProgress ? { onProgress: options.onProgress } : {}),
    onStaleLock: ({ path, pid, why }) =>
      logger.warn({ lock: path, pid }, `removed a stale lock ${path} (pid ${pid}): ${why}`),
  });
  // whatever fails from here on, the database (its lock and socket) is released before the error
  try {
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

  const sessions = createSessionRepository(database.db);
  const apiKeys = createApiKeyRepository(database.db);
  const signers = await resultTokenSigners(database, box, config, logger, apiKeys, options);
  const resultTokens = signers?.live;
  const consumedResults = createConsumedResultRepository(database.db);
  const revocationRepo = createRevocationRepository(database.db);
  // a new database starts from the snapshot shipped with this build
  await revocationRepo.seed();
  const revocations = createRevocationSource(revocationRepo, { ttlMs: propagationMs });
  const metrics = createMetrics({
    sessionCounts: () => sessions.counts(),
    androidRevocationTakenAt: () => revocations.info()?.takenAt ?? null,
  });
  const googleDecoder = createPlayIntegrityClient({
    oauthUrl: config.googleOauthUrl,
    playIntegrityUrl: config.googlePlayIntegrityUrl,
    timeoutMs: config.googleTimeoutMs,
    maxInFlight: config.googleMaxInFlight,
    onEvent: (e) => metrics.observeGoogle(e.endpoint, e.outcome),
  });
  const allowlist = createCachedAllowlist(
    reportingKeyFailures(createAllowlistRepository(database.db, box), logger),
    { ttlMs: propagationMs },
  );
  const devCa = createDevCaRepository(database.db);
  const receiptRoots = configuredReceiptRoots(config.appleReceiptRootCaPath);
  if (config.appleReceiptRootCaPath)
    logger.warn(
      { path: config.appleReceiptRootCaPath },
      'ATTEST_APPLE_RECEIPT_ROOT_CA is set: App Attest receipts chain to these roots instead of Apple Root CA - G3',
    );
  const receipts = createReceiptVerifier(receiptRoots);
  const verifiersFor = createModeVerifiers({
    allowlist,
    appleKeys: createAppleKeyRepository(database.db),
    appleRoots,
    devRoot: () => devCa.root(),
    ttlMs: propagationMs,
    googleDecoder,
    receipts,
    android: {
      keys: createAndroidKeyRepository(database.db),
      roots: configuredAndroidRoots(config.androidRootCaPath),
      revocations: () => revocations.list(),
    },
    // one count per key for every instance: the database's, never a per-process one
    velocity: createDeviceVelocityRepository(database.db),
  });
  await revocations.list();
  if (!config.testKeys)
    logger.info('test API keys are off (ATTEST_TEST_KEYS=off or --no-test-keys): they answer 403');
  const auth = createApiKeyAuthenticator({
    lookup: apiKeys,
    revalidateMs: propagationMs,
    onTouchError: (err) => logger.warn({ err: describeFault(err) }, 'could not record API key use'),
    onStoredKeyProblem: (apiKeyId, problem) =>
      logger.error({ apiKeyId, problem }, 'API key refused: its stored row is damaged'),
  });
  const separateMetrics = config.metricsPort !== undefined;
  // PostgreSQL: fail at once while the database cannot be reached, serve again when it answers
  const probe = database.probe?.bind(database);
  const breaker = probe
    ? createDatabaseBreaker({
        probe,
        onChange: (open, cause) =>
          open
            ? logger.error(
                { err: describeFault(cause) },
                'the database cannot be reached: requests fail at once until a probe answers',
              )
            : logger.info('the database answers again'),
      })
    : undefined;
  const stats = await startStats(database, config, logger, allowlist, {
    ...options,
    propagationMs,
  });
  const app = createApp({
    logger,
    auth,
    sessions,
    verify: async (input, mode) =>
      verifyToken(input, { now: () => new Date(), verifiers: await verifiersFor(mode) }),
    testKeys: config.testKeys,
    metrics,
    ready: async () => (await migrationStatus(database.db)).every((m) => m.applied),
    sessionTtlSeconds: config.sessionTtlSeconds,
    // Google's own bound must run out first, or a slow Google would pass for a hanging database
    requestDeadlineMs: Math.max(5000, config.googleTimeoutMs + 2000),
    onBackendTimeout: createPoolWatchdog(database, {
      onRecycle: () =>
        logger.warn(
          'the database answers on a new connection while the pool hangs: replacing the pool',
        ),
      onVerdict: (verdict) => {
        if (verdict === 'busy')
          logger.warn(
            'requests miss their deadline while the event loop is blocked: the process is saturated, the database pool is kept',
          );
      },
    }),
    ...(breaker ? { breaker } : {}),
    metricsRoute: !separateMetrics,
    ...(resultTokens ? { resultTokens } : {}),
    ...(signers?.test ? { testResultTokens: signers.test } : {}),
    ...(signers
      ? {
          resultConsumer: createResultConsumer({
            live: signers.live,
            test: signers.test,
            consumed: consumedResults,
          }),
        }
      : {}),
    deviceRecall: createDeviceRecallWrite({
      allowlist,
      keyCache: new KeyCache(),
      google: googleDecoder,
    }),
    ...(stats.recorder ? { stats: stats.recorder } : {}),
    allowlisted: allowlistedApp(allowlist),
  });

  const reloadNow = () => {
    allowlist.invalidate();
    verifiersFor.invalidate();
    revocations.invalidate();
    auth.revalidateAll();
  };
  /**
   * After an administrative change through the admin socket: the caches are dropped and the
   * allowlist read again, so the change applies before the command returns (other instances
   * hear of it through LISTEN/NOTIFY, or within PROPAGATION_MS).
   */
  const reload = async () => {
    reloadNow();
    try {
      await allowlist.appleApps();
    } catch (err) {
      // the change is committed; the next request reads the allowlist again
      logger.warn({ err: describeFault(err) }, 'could not reload the allowlist');
    }
  };
  // every instance hears of changes made anywhere (the change_notify migration's triggers); a
  // (re)connected LISTEN reloads too, since what was announced while it was down is lost
  if (database.listen) {
    await database.listen(
      CHANGES_CHANNEL,
      (table) => {
        reloadNow();
        options.onChange?.(table);
      },
      reloadNow,
    );
  }
  // the embedded database has no other door: the CLI's commands run here, through the admin API
  const admin = database.announce ? await startAdmin(database, config, logger, box, reload) : null;

  // slow clients must not hold sockets: whole request within 10 s, headers within 5 s. Node checks
  // those limits only every connectionsCheckingInterval (30 s by default): check every second.
  const serverOptions = {
    requestTimeout: 10_000,
    headersTimeout: 5_000,
    keepAliveTimeout: 5_000,
    connectionsCheckingInterval: 1_000,
  };
  // a failure from here on is released by startServer, which closes the database
  let server: Server;
  try {
    server = await listen(app.fetch, config.port, config.host, serverOptions);
  } catch (err) {
    await admin?.stop();
    throw err;
  }
  server.maxHeadersCount = 100;
  const api = drainable(server);
  const url = urlOf(server, config.host, config.port);
  logger.info({ url, database: database.kind, where: database.where }, 'listening');

  let metricsServer: Drainable | undefined;
  let metricsUrl: string | undefined;
  if (separateMetrics) {
    let listening: Server;
    try {
      listening = await listen(
        createMetricsApp(metrics).fetch,
        config.metricsPort!,
        config.metricsHost,
        serverOptions,
      );
    } catch (err) {
      await closeServer(server);
      await admin?.stop();
      const e = err as NodeJS.ErrnoException;
      throw new Error(
        e.code === 'EADDRINUSE'
          ? `metrics port ${config.metricsPort} on ${config.metricsHost} is in use: pick another with --metrics-port or ATTEST_METRICS_PORT`
          : `cannot serve metrics on ${config.metricsHost}:${config.metricsPort}: ${e.message}`,
      );
    }
    metricsServer = drainable(listening);
    metricsUrl = `${urlOf(listening, config.metricsHost, config.metricsPort!)}/metrics`;
    logger.info({ url: metricsUrl }, 'metrics listening');
  }

  // its schedule starts once nothing can fail the start any more (close() stops it); what was
  // counted before is written by its first flush
  stats.recorder?.start();
  // PGlite belongs to this process alone; PostgreSQL may be shared by several instances
  const pruner = startSessionPruner({
    pruneBatch: (cutoff, limit) =>
      sessions.pruneBatch(cutoff, limit, { advisoryLock: database.kind === 'postgres' }),
    retentionSeconds: config.sessionRetentionSeconds,
    ...(options.pruneIntervalMs !== undefined ? { intervalMs: options.pruneIntervalMs } : {}),
    onRun: ({ deleted, skipped }) =>
      logger.info(
        { deleted, skipped },
        skipped ? 'another instance is pruning sessions' : 'sessions pruned',
      ),
    onError: (err) => logger.warn({ err: describeFault(err) }, 'could not prune sessions'),
  });

  const consumedPruner = startConsumedResultPruner(consumedResults, {
    advisoryLock: database.kind === 'postgres',
    logger,
    ...(options.pruneIntervalMs !== undefined ? { intervalMs: options.pruneIntervalMs } : {}),
  });

  // Apple's risk metric: receipts of recently used keys are refreshed about daily. Claims are
  // atomic, so every instance runs it; a team without a DeviceCheck key is left alone.
  const credentials = createAppleCredentialRepository(database.db, box);
  const refresher = startReceiptRefresher(
    createReceiptRefresher({
      queue: createReceiptRefreshQueue(database.db),
      credentials,
      client: createReceiptClient({
        developmentUrl: config.appleReceiptUrlDevelopment,
        productionUrl: config.appleReceiptUrlProduction,
        timeoutMs: config.appleReceiptTimeoutMs,
      }),
      receipts,
      onAttempt: (outcome, riskMetric) => metrics.observeReceiptRefresh(outcome, riskMetric),
      onCredentialRefused: (teamId, keyId, status) =>
        logger.error(
          { teamId, keyId, status },
          `Apple refused the DeviceCheck key ${keyId} of team ${teamId} (HTTP ${status}): its receipts are not refreshed until "attest apple credentials add ${teamId}" gives a key with DeviceCheck enabled`,
        ),
      onInvalid: (keyId, problem) =>
        logger.warn(
          { keyId: Buffer.from(keyId).toString('base64'), problem },
          'a refreshed App Attest receipt failed its checks: the previous one is kept',
        ),
    }),
    {
      ...(options.receiptRefreshIntervalMs !== undefined
        ? { intervalMs: options.receiptRefreshIntervalMs }
        : {}),
      onRun: (run) => logger.info(run, 'App Attest receipts refreshed'),
      onError: (err) =>
        logger.warn({ err: describeFault(err) }, 'could not refresh App Attest receipts'),
    },
  );

  const onStale = (info: { takenAt: Date; source: string; ageDays: number }) =>
    logger.warn(
      { takenAt: info.takenAt.toISOString(), source: info.source, ageDays: info.ageDays },
      'the Android attestation status list is older than 7 days: revoked attestation keys may pass (attest android revocations update FILE, or let serve reach ATTEST_ANDROID_REVOCATION_URL)',
    );
  const intervalMs = (config.androidRevocationIntervalSeconds ?? 3600) * 1000;
  const revocationUrl = androidRevocationUrl(config);
  const revocationRefresher = revocationUrl
    ? startRevocationRefresh({
        url: revocationUrl,
        intervalMs,
        repo: revocationRepo,
        onUpdate: ({ entries, stored }) =>
          logger.info(
            { entries, stored },
            stored
              ? 'Android attestation status list refreshed'
              : 'Android attestation status list fetched; a newer one is stored',
          ),
        onError: (err) =>
          logger.warn(
            { err: describeFault(err), url: revocationUrl },
            'could not refresh the Android attestation status list',
          ),
        onStale,
      })
    : startAgeCheck(() => checkRevocationAge(revocationRepo, new Date(), onStale), intervalMs);

  // loaded once the socket listens rather than before: the first attestation finds it ready
  setImmediate(peculiarX509).unref();

  return {
    url,
    port: portOf(server, config.port),
    ...(metricsUrl ? { metricsUrl } : {}),
    database,
    masterKey: {
      id: masterKey.key.id,
      source: masterKey.source,
      created: masterKey.created,
      ...(masterKey.defaultFile ? { defaultFile: masterKey.defaultFile } : {}),
    },
    reloadNow,
    async close() {
      // the drain starts at once: no new connection, and every answer from now says Connection: close
      const drained = Promise.all([api.drain(DRAIN_MS), metricsServer?.drain(DRAIN_MS)]);
      await pruner.stop();
      await consumedPruner.stop();
      await refresher.stop();
      await revocationRefresher.stop();
      await Promise.all([drained, admin?.stop()]);
      // after the drain: the last answers are counted; a crash would lose at most the last interval
      await stats.recorder?.stop();
      breaker?.stop();
      await database.close();
    },
  };
}
