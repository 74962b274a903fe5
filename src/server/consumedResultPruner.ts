import type { Logger } from 'pino';
import { ASSERTION_MEMORY_SECONDS, type AndroidKeyRepository } from '../db/androidKeys.js';
import type { ConsumedResultRepository } from '../db/consumedResults.js';
import { describeFault } from './app.js';
import { startSessionPruner } from './sessionPruner.js';

/** How long past a result token's exp its consumption is kept (then pruned). */
export const CONSUMED_RESULT_RETENTION_SECONDS = 3600;

/**
 * Deletes the jtis of consumed result tokens an hour past their exp, with the session pruner's
 * schedule and bounded batches (its own advisory lock on PostgreSQL: one instance at a time).
 * By then the token no longer verifies, so its jti can never count as a first consume again.
 */
export function startConsumedResultPruner(
  consumed: Pick<ConsumedResultRepository, 'pruneBatch'>,
  options: { advisoryLock: boolean; logger: Logger; intervalMs?: number },
) {
  const { logger } = options;
  return startSessionPruner({
    pruneBatch: (cutoff, limit) =>
      consumed.pruneBatch(cutoff, limit, { advisoryLock: options.advisoryLock }),
    retentionSeconds: CONSUMED_RESULT_RETENTION_SECONDS,
    ...(options.intervalMs !== undefined ? { intervalMs: options.intervalMs } : {}),
    onRun: ({ deleted, skipped }) =>
      logger.info(
        { deleted, skipped },
        skipped
          ? 'another instance is pruning consumed result tokens'
          : 'consumed result tokens pruned',
      ),
    onError: (err) =>
      logger.warn({ err: describeFault(err) }, 'could not prune consumed result tokens'),
  });
}

/**
 * Deletes the android-key assertions accepted more than ASSERTION_MEMORY_SECONDS ago (31 days,
 * longer than any per-device window), with the session pruner's schedule and bounded batches.
 */
export function startAndroidAssertionPruner(
  keys: Pick<AndroidKeyRepository, 'pruneAssertionBatch'>,
  options: { advisoryLock: boolean; logger: Logger; intervalMs?: number },
) {
  const { logger } = options;
  return startSessionPruner({
    pruneBatch: (cutoff, limit) =>
      keys.pruneAssertionBatch(cutoff, limit, { advisoryLock: options.advisoryLock }),
    retentionSeconds: ASSERTION_MEMORY_SECONDS,
    ...(options.intervalMs !== undefined ? { intervalMs: options.intervalMs } : {}),
    onRun: ({ deleted, skipped }) =>
      logger.info(
        { deleted, skipped },
        skipped
          ? 'another instance is pruning android-key assertions'
          : 'android-key assertions pruned',
      ),
    onError: (err) =>
      logger.warn({ err: describeFault(err) }, 'could not prune android-key assertions'),
  });
}
