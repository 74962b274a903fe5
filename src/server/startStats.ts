import type { Logger } from 'pino';
import { DEFAULT_STATS_RETENTION_SECONDS, type Config } from '../config.js';
import type { AllowlistReader } from '../core/ports.js';
import type { DatabaseHandle } from '../db/database.js';
import { createVerificationStatsRepository } from '../db/verificationStats.js';
import { boundDatabaseWait } from '../db/databaseDeadline.js';
import { describeFault } from './app.js';
import { createStatsRecorder, type StatsRecorder } from './statsRecorder.js';

export interface StatsOptions {
  /** how often counts are written (default 10 s); tests shorten it */
  statsFlushIntervalMs?: number;
  /** how often old counts are deleted (default 10 min) */
  statsPruneIntervalMs?: number;
  /** told after each write of counts that succeeded */
  onStatsFlush?: (rows: number) => void;
  /** rows held while the database cannot take them (default 20,000); tests lower it */
  statsMaxPendingRows?: number;
  /** the clock that places counts in minutes (tests) */
  statsNow?: () => number;
}

/**
 * How long one write of counts may wait for the database (lag-aware); under the 5 s the final
 * flush at shutdown is given, so counts a hung connection holds are reported, not lost unseen.
 */
export const STATS_WRITE_TIMEOUT_MS = 2000;

/**
 * The verification statistics of one instance (`attest stats`): the recorder the verify route
 * counts into (null with ATTEST_STATS=off; its schedule begins with `start()` once the server
 * listens).
 */
export async function startStats(
  database: DatabaseHandle,
  config: Config,
  logger: Logger,
  allowlist: Pick<AllowlistReader, 'appleApps' | 'androidPackages'>,
  options: StatsOptions & { propagationMs: number; onWriteError?: (err: unknown) => void },
): Promise<{ recorder: StatsRecorder | null }> {
  if (config.stats === false) return { recorder: null };
  const repo = createVerificationStatsRepository(database.db);
  let failing = false;
  const recorder = createStatsRecorder({
    // a write on a connection that stopped answering is given up (its batch kept for the next
    // flush, or reported at stop) rather than holding every later flush and the shutdown; a
    // batch that committed before it was given up adds nothing when sent again (its id)
    write: (batch) => boundDatabaseWait(repo.add(batch), STATS_WRITE_TIMEOUT_MS),
    // one instance at a time on PostgreSQL: the others skip that round
    prune: (cutoff) => repo.prune(cutoff, { advisoryLock: true }),
    retentionSeconds: config.statsRetentionSeconds ?? DEFAULT_STATS_RETENTION_SECONDS,
    ...(options.statsFlushIntervalMs !== undefined
      ? { flushIntervalMs: options.statsFlushIntervalMs }
      : {}),
    ...(options.statsNow ? { now: options.statsNow } : {}),
    ...(options.statsMaxPendingRows !== undefined
      ? { maxPendingRows: options.statsMaxPendingRows }
      : {}),
    ...(options.statsPruneIntervalMs !== undefined
      ? { pruneIntervalMs: options.statsPruneIntervalMs }
      : {}),
    onError: (err, pendingRows) => {
      options.onWriteError?.(err);
      // once per outage, not every 10 s
      if (!failing)
        logger.warn(
          { err: describeFault(err), pendingRows },
          'could not write verification statistics: they are kept in memory and retried',
        );
      failing = true;
    },
    onDropped: ({ counts, rows, minutes }) =>
      logger.warn(
        { droppedCounts: counts, droppedRows: rows, droppedMinutes: minutes },
        `dropped ${counts} verification counts (the oldest ${minutes} minute(s)) that could not be written to the database`,
      ),
    onFlush: (rows) => {
      if (failing) logger.info('verification statistics are written again');
      failing = false;
      options.onStatsFlush?.(rows);
    },
    onPruneError: (err) =>
      logger.warn({ err: describeFault(err) }, 'could not delete old verification statistics'),
    onPruned: (deleted) => {
      if (deleted > 0) logger.info({ deleted }, 'old verification statistics deleted');
    },
  });
  return { recorder };
}
