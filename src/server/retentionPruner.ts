import type { Logger } from 'pino';
import { describeFault } from './app.js';
import { startSessionPruner } from './sessionPruner.js';

/**
 * A table whose rows expire: deletes a bounded batch older than `cutoff`, and says how many (null:
 * another instance holds the table's prune lock).
 */
export interface ExpiringRows {
  pruneBatch(
    cutoff: Date,
    limit: number,
    options: { advisoryLock: boolean },
  ): Promise<number | null>;
}

/**
 * Deletes `what` older than `retentionSeconds` (test-mode state: ATTEST_TEST_RETENTION; token
 * captures: ATTEST_CAPTURE_RETENTION) with the session pruner's schedule and bounded batches, under
 * the table's own advisory lock on PostgreSQL (one instance at a time). A retention shorter than a
 * minute (a rehearsal's) is kept to within about twice itself.
 */
export function startRetentionPruner(
  what: string,
  rows: ExpiringRows,
  options: { retentionSeconds: number; advisoryLock: boolean; logger: Logger; intervalMs?: number },
) {
  const { logger } = options;
  return startSessionPruner({
    pruneBatch: (cutoff, limit) =>
      rows.pruneBatch(cutoff, limit, { advisoryLock: options.advisoryLock }),
    retentionSeconds: options.retentionSeconds,
    intervalMs:
      options.intervalMs ?? Math.min(60_000, Math.max(1000, options.retentionSeconds * 1000)),
    onRun: ({ deleted, skipped }) =>
      logger.info(
        { deleted, skipped },
        skipped ? `another instance is pruning ${what}` : `${what} pruned`,
      ),
    onError: (err) => logger.warn({ err: describeFault(err) }, `could not prune ${what}`),
  });
}
