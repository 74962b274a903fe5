import type { Logger } from 'pino';
import type { CaptureRepository } from '../db/captures.js';
import { describeFault } from './app.js';
import { startSessionPruner } from './sessionPruner.js';

/**
 * Deletes token captures verified more than `retentionSeconds` ago (ATTEST_CAPTURE_RETENTION),
 * with the session pruner's schedule and bounded batches (its own advisory lock on PostgreSQL:
 * one instance at a time). Runs whatever ATTEST_CAPTURE is: captures kept before it was turned
 * off expire too.
 */
export function startCapturePruner(
  captures: Pick<CaptureRepository, 'pruneBatch'>,
  options: { retentionSeconds: number; advisoryLock: boolean; logger: Logger; intervalMs?: number },
) {
  const { logger } = options;
  return startSessionPruner({
    pruneBatch: (cutoff, limit) =>
      captures.pruneBatch(cutoff, limit, { advisoryLock: options.advisoryLock }),
    retentionSeconds: options.retentionSeconds,
    // a retention shorter than a minute (a rehearsal's) is kept to within about twice itself
    intervalMs:
      options.intervalMs ?? Math.min(60_000, Math.max(1000, options.retentionSeconds * 1000)),
    onRun: ({ deleted, skipped }) =>
      logger.info(
        { deleted, skipped },
        skipped ? 'another instance is pruning token captures' : 'token captures pruned',
      ),
    onError: (err) => logger.warn({ err: describeFault(err) }, 'could not prune token captures'),
  });
}
