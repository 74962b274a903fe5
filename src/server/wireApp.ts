import type { X509Certificate } from 'node:crypto';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { AllowlistReader } from '../core/ports.js';
import { createIssuerVelocityRepository } from '../db/issuerVelocity.js';
import { cachedIssuerBlocks, createIssuerBlockRepository } from '../db/issuerBlocks.js';
import { verifyToken } from '../core/verify.js';
import { configuredReceiptRoots } from '../configuredAppleRoots.js';
import { createReceiptVerifier } from '../core/apple/verifyReceipt.js';
import { createAllowlistRepository } from '../db/allowlist.js';
import { createCachedAllowlist } from '../db/cachedAllowlist.js';
import { createApiKeyRepository } from '../db/apiKeys.js';
import { createAppleKeyRepository } from '../db/appleKeys.js';
import { createAndroidKeyRepository } from '../db/androidKeys.js';
import { createDeviceVelocityRepository } from '../db/deviceVelocity.js';
import { createRevocationRepository, createRevocationSource } from '../db/androidRevocations.js';
import { configuredAndroidRoots } from '../configuredAndroidRoots.js';
import { boundedDb, type DatabaseHandle } from '../db/database.js';
import { createDevCaRepository } from '../db/devCa.js';
import { migrationStatus } from '../db/migrate.js';
import { createPoolWatchdog } from '../db/poolWatchdog.js';
import { createDatabaseBreaker } from '../db/databaseBreaker.js';
import { createClientAddress } from './clientAddress.js';
import { createWriteHealth } from '../db/writeHealth.js';
import { startTelemetry } from './startTelemetry.js';
import type { SecretBox } from '../db/secretBox.js';
import { createSessionRepository } from '../db/sessions.js';
import { createConsumedResultRepository } from '../db/consumedResults.js';
import { createResultConsumer } from './resultConsumer.js';
import { createApiKeyAuthenticator } from './apiKeyAuthenticator.js';
import { createPlayIntegrityClient } from '../upstream/playIntegrityClient.js';
import { KeyCache } from '../core/gms/keyCache.js';
import { createApp, describeFault } from './app.js';
import { createMetrics } from './metrics.js';
import { createModeVerifiers } from './modeVerifiers.js';
import { createDeviceRecallWrite } from './deviceRecall.js';
import { reportingKeyFailures } from './reportingKeyFailures.js';
import { resultTokenSigners } from './resultTokenSigners.js';
import { allowlistedApp } from './allowlistedApp.js';
import type { StatsRecorder } from './statsRecorder.js';
import type { StartOptions } from './start.js';
import { createCaptureRepository } from '../db/captures.js';
import { createTokenCapturer } from './tokenCapture.js';

/** Where a process's verify counts go. */
export interface StatsSink {
  recorder: Pick<StatsRecorder, 'record' | 'start' | 'stop'> | null;
}

export interface WireOptions extends StartOptions {
  propagationMs: number;
  /**
   * this process runs the jobs (one `serve` process, or a cluster's primary): the database-wide
   * gauges (stored sessions, status list age) and the start-up notices are its; a cluster worker
   * leaves them to the primary
   */
  runsJobs: boolean;
  /**
   * the verify counts' sink, given the allowlist: startStats in one process, the primary's over
   * IPC in a worker; `onWriteError` is told of each failed flush (readiness follows writes)
   */
  stats(
    allowlist: Pick<AllowlistReader, 'appleApps' | 'androidPackages'>,
    onWriteError: (err: unknown) => void,
  ): Promise<StatsSink>;
  /** what GET /metrics answers when not this process's registry (a worker: the sum of all) */
  scrape?: () => Promise<string>;
}

/**
 * The HTTP app over `database` with everything a request needs (repositories, caches, verifiers,
 * result token signers, metrics, statistics), and the reloads that drop those caches: what one
 * `attest serve` process and each cluster worker serve alike.
 */
export async function wireApp(
  database: DatabaseHandle,
  box: SecretBox,
  appleRoots: readonly X509Certificate[],
  config: Config,
  logger: Logger,
  options: WireOptions,
) {
  const { propagationMs } = options;
  // what requests (and readiness) read and write: each statement waits at most the wait deadline
  const db = boundedDb(database, config.dbWaitTimeoutMs);
  const sessions = createSessionRepository(db);
  // the jobs' and the scrape's (outside any request before too): a count or a prune of a large
  // table may take longer than a request's statement wait
  const jobSessions = createSessionRepository(database.db);
  const apiKeys = createApiKeyRepository(db);
  const signers = await resultTokenSigners(database, box, config, logger, apiKeys, options);
  const resultTokens = signers?.live;
  const consumedResults = createConsumedResultRepository(db);
  const revocations = createRevocationSource(createRevocationRepository(db), {
    ttlMs: propagationMs,
  });
  const telemetry = await startTelemetry(config.otel);
  const metrics = createMetrics({
    telemetry,
    // the breaker is made below; a scrape comes only after the server listens
    databaseBreakerOpen: () => breaker?.isOpen() ?? false,
    ...(options.runsJobs
      ? {
          sessionCounts: () => jobSessions.counts(),
          androidRevocationTakenAt: () => revocations.info()?.takenAt ?? null,
        }
      : {}),
  });
  const googleDecoder = createPlayIntegrityClient({
    oauthUrl: config.googleOauthUrl,
    playIntegrityUrl: config.googlePlayIntegrityUrl,
    timeoutMs: config.googleTimeoutMs,
    maxInFlight: config.googleMaxInFlight,
    onEvent: (e) => metrics.observeGoogle(e.endpoint, e.outcome),
  });
  const allowlist = createCachedAllowlist(
    reportingKeyFailures(createAllowlistRepository(db, box), logger),
    { ttlMs: propagationMs },
  );
  const devCa = createDevCaRepository(db);
  const receiptRoots = configuredReceiptRoots(config.appleReceiptRootCaPath);
  if (config.appleReceiptRootCaPath && options.runsJobs)
    logger.warn(
      { path: config.appleReceiptRootCaPath },
      'ATTEST_APPLE_RECEIPT_ROOT_CA is set: App Attest receipts chain to these roots instead of Apple Root CA - G3',
    );
  const receipts = createReceiptVerifier(receiptRoots);
  const verifiersFor = createModeVerifiers({
    allowlist,
    appleKeys: createAppleKeyRepository(db),
    appleRoots,
    devRoot: () => devCa.root(),
    ttlMs: propagationMs,
    googleDecoder,
    receipts,
    android: {
      keys: createAndroidKeyRepository(db),
      roots: configuredAndroidRoots(config.androidRootCaPath),
      revocations: () => revocations.list(),
      // the leaked-keybox defence's counts: the database's, shared by every instance
      issuers: createIssuerVelocityRepository(db),
      blockedIssuers: cachedIssuerBlocks(createIssuerBlockRepository(db), {
        ttlMs: propagationMs,
      }),
    },
    // one count per key for every instance: the database's, never a per-process one
    velocity: createDeviceVelocityRepository(db),
  });
  await revocations.list();
  if (!config.testKeys && options.runsJobs)
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
  // a full disk or a read-only database fails writes while reads pass: readiness says so
  const writeHealth = createWriteHealth(db, {
    onChange: (writable, cause) =>
      writable
        ? logger.info('the database takes writes again')
        : logger.error(
            { err: describeFault(cause) },
            'the database refuses writes (a full disk or a read-only database): /readyz answers 503 until a write passes',
          ),
  });
  const stats = await options.stats(allowlist, (err) => writeHealth.observe(err));
  // ATTEST_CAPTURE: tokens kept for replay, written after the answer is known, never awaited
  const capture = config.capture;
  const capturer =
    capture && capture.mode !== 'off'
      ? createTokenCapturer({
          ...capture,
          repo: createCaptureRepository(db),
          box,
          logger,
        })
      : undefined;
  const app = createApp({
    logger,
    auth,
    sessions,
    verify: async (input, mode, apiKeyId) => {
      // one instant for the whole verify: a capture replays as of it
      const at = new Date();
      const outcome = await verifyToken(input, {
        now: () => at,
        verifiers: await verifiersFor(mode),
      });
      capturer?.capture({ input, mode, apiKeyId, at, outcome });
      return outcome;
    },
    testKeys: config.testKeys,
    metrics,
    telemetry,
    ready: async () => (await migrationStatus(db)).every((m) => m.applied),
    sessionTtlSeconds: config.sessionTtlSeconds,
    // Google's own bound must run out first, or a slow Google would pass for a hanging database
    requestDeadlineMs: Math.max(5000, config.googleTimeoutMs + 2000),
    writeHealth,
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
        if (verdict === 'awaiting standby')
          logger.error(
            'commits wait for a synchronous standby that does not confirm them (synchronous_standby_names on the primary): writes answer 503 until one does; the database pool is kept',
          );
      },
    }),
    ...(breaker ? { breaker } : {}),
    ...(config.trustedProxies?.length
      ? { clientAddress: createClientAddress(config.trustedProxies) }
      : {}),
    metricsRoute: !separateMetrics,
    ...(options.scrape ? { scrape: options.scrape } : {}),
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
    // the allowlist the verifiers read: a rule change applies to the counts at once
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
  return {
    app,
    metrics,
    /** OTLP export (absent without OTEL_* variables): shut down after the drain, to flush */
    telemetry,
    breaker,
    stats,
    /** ATTEST_CAPTURE's writer (absent when off) */
    capturer,
    reloadNow,
    reload,
    // the jobs' (startJobs.ts): a prune or a list refresh may take longer than a request's wait
    sessions: jobSessions,
    consumedResults: createConsumedResultRepository(database.db),
    revocationRepo: createRevocationRepository(database.db),
    revocations,
    receipts,
  };
}

export type WiredApp = Awaited<ReturnType<typeof wireApp>>;
