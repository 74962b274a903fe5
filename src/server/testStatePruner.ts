import type { Logger } from 'pino';
import type { TestStateRepository } from '../db/testState.js';
import { describeFault } from './app.js';
import { startSessionPruner } from './sessionPruner.js';

/**
 * Deletes what test-mode API keys left more than `retentionSeconds` ago (ATTEST_TEST_RETENTION),
 * with the session pruner's schedule and bounded batches (its own advisory lock on PostgreSQL:
 * one instance at a time). Live rows are never touched (db/testState.ts).
 */
export function startTestStatePruner(
  testState: Pick<TestStateRepository, 'pruneBatch'>,
  options: { retentionSeconds: number; advisoryLock: boolean; logger: Logger; intervalMs?: number },
) {
  const { logger } = options;
  return startSessionPruner({
    pruneBatch: (cutoff, limit) =>
      testState.pruneBatch(cutoff, limit, { advisoryLock: options.advisoryLock }),
    retentionSeconds: options.retentionSeconds,
    ...(options.intervalMs !== undefined ? { intervalMs: options.intervalMs } : {}),
    onRun: ({ deleted, skipped }) =>
      logger.info(
        { deleted, skipped },
        skipped ? 'another instance is pruning test-mode state' : 'test-mode state pruned',
      ),
    onError: (err) => logger.warn({ err: describeFault(err) }, 'could not prune test-mode state'),
  });
}
