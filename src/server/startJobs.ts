import type { Logger } from 'pino';
import { androidRevocationUrl, DEFAULT_TEST_RETENTION_SECONDS, type Config } from '../config.js';
import type { ReceiptVerifier } from '../core/apple/verifyReceipt.js';
import { createReceiptClient } from '../upstream/appleReceiptClient.js';
import { createAppleCredentialRepository } from '../db/appleCredentials.js';
import type { RevocationRepository } from '../db/androidRevocations.js';
import type { DatabaseHandle } from '../db/database.js';
import type { ConsumedResultRepository } from '../db/consumedResults.js';
import { createReceiptRefreshQueue } from '../db/receiptRefreshQueue.js';
import type { SecretBox } from '../db/secretBox.js';
import type { createSessionRepository } from '../db/sessions.js';
import { describeFault } from './app.js';
import { startAndroidAssertionPruner, startConsumedResultPruner } from './consumedResultPruner.js';
import { createAndroidKeyRepository } from '../db/androidKeys.js';
import type { Metrics } from './metrics.js';
import { createReceiptRefresher, startReceiptRefresher } from './receiptRefresher.js';
import { checkRevocationAge, startAgeCheck, startRevocationRefresh } from './revocationRefresh.js';
import { startSessionPruner } from './sessionPruner.js';
import { DEFAULT_CAPTURE_RETENTION_SECONDS } from '../captureBound.js';
import { createTestStateRepository } from '../db/testState.js';
import { startRetentionPruner } from './retentionPruner.js';
import { createCaptureRepository } from '../db/captures.js';

export interface JobOptions {
  pruneIntervalMs?: number;
  receiptRefreshIntervalMs?: number;
}

/**
 * The background jobs of a server, run once per server (in a cluster, by its primary): the
 * session, consumed-result, android-key assertion and test-mode state pruners, the App Attest receipt refresher and the Android status
 * list refresh (or its age check). Resolves nothing; `stop` ends them all.
 */
export function startJobs(
  database: DatabaseHandle,
  box: SecretBox,
  config: Config,
  logger: Logger,
  deps: {
    sessions: ReturnType<typeof createSessionRepository>;
    consumedResults: ConsumedResultRepository;
    revocationRepo: RevocationRepository;
    receipts: ReceiptVerifier;
    metrics: Pick<Metrics, 'observeReceiptRefresh'>;
  },
  options: JobOptions,
): { stop(): Promise<void> } {
  const { sessions, consumedResults, revocationRepo, receipts, metrics } = deps;
  // the database may be shared by several instances (or worker processes): one prunes at a time
  const pruner = startSessionPruner({
    pruneBatch: (cutoff, limit) => sessions.pruneBatch(cutoff, limit, { advisoryLock: true }),
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
    advisoryLock: true,
    logger,
    ...(options.pruneIntervalMs !== undefined ? { intervalMs: options.pruneIntervalMs } : {}),
  });
  const assertionPruner = startAndroidAssertionPruner(createAndroidKeyRepository(database.db), {
    advisoryLock: true,
    logger,
    ...(options.pruneIntervalMs !== undefined ? { intervalMs: options.pruneIntervalMs } : {}),
  });

  const testRetentionSeconds = config.testRetentionSeconds ?? DEFAULT_TEST_RETENTION_SECONDS;
  // live rows are never touched (db/testState.ts)
  const testStatePruner = startRetentionPruner(
    'test-mode state',
    createTestStateRepository(database.db),
    {
      retentionSeconds: testRetentionSeconds,
      advisoryLock: true,
      logger,
      ...(options.pruneIntervalMs !== undefined ? { intervalMs: options.pruneIntervalMs } : {}),
    },
  );

  // captures kept for replay expire (ATTEST_CAPTURE_RETENTION), kept or not any more
  const capturePruner = startRetentionPruner(
    'token captures',
    createCaptureRepository(database.db),
    {
      retentionSeconds: config.capture?.retentionSeconds ?? DEFAULT_CAPTURE_RETENTION_SECONDS,
      advisoryLock: true,
      logger,
      ...(options.pruneIntervalMs !== undefined ? { intervalMs: options.pruneIntervalMs } : {}),
    },
  );

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

  return {
    async stop() {
      await pruner.stop();
      await consumedPruner.stop();
      await assertionPruner.stop();
      await testStatePruner.stop();
      await capturePruner.stop();
      await refresher.stop();
      await revocationRefresher.stop();
    },
  };
}
