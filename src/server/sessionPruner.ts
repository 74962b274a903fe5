export interface SessionPrunerOptions {
  /** one bounded delete; null when another instance holds the prune lock */
  pruneBatch(cutoff: Date, limit: number): Promise<number | null>;
  /** sessions expired or consumed longer ago than this are deleted */
  retentionSeconds: number;
  intervalMs?: number;
  batchSize?: number;
  /** batches per run; a run that reaches it is followed at once by another */
  maxBatchesPerRun?: number;
  now?: () => number;
  /** after each run that deleted something or was skipped */
  onRun?(result: PruneRun): void;
  onError?(err: unknown): void;
}

export interface PruneRun {
  deleted: number;
  /** another instance was pruning */
  skipped: boolean;
}

/**
 * Deletes old sessions on a schedule, in small batches with a pause between them, so a table
 * fed by a flood of `init` is kept at about (init rate) x (ttl + retention) rows without long
 * locks or one huge delete.
 */
export function startSessionPruner(options: SessionPrunerOptions) {
  const now = options.now ?? Date.now;
  const intervalMs = options.intervalMs ?? 60_000;
  const batchSize = options.batchSize ?? 1000;
  const maxBatches = options.maxBatchesPerRun ?? 100;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<PruneRun & { more: boolean }> | undefined;

  async function run(): Promise<PruneRun & { more: boolean }> {
    const cutoff = new Date(now() - options.retentionSeconds * 1000);
    let deleted = 0;
    for (let i = 0; i < maxBatches && !stopped; i++) {
      const n = await options.pruneBatch(cutoff, batchSize);
      if (n === null) return { deleted, skipped: true, more: false };
      deleted += n;
      if (n < batchSize) return { deleted, skipped: false, more: false };
      // let requests waiting on the database in between
      await new Promise((resolve) => setImmediate(resolve));
    }
    return { deleted, skipped: false, more: !stopped };
  }

  function schedule(ms: number) {
    if (stopped) return;
    timer = setTimeout(() => {
      running = run();
      running
        .then(
          (result) => {
            if (result.deleted > 0 || result.skipped)
              options.onRun?.({ deleted: result.deleted, skipped: result.skipped });
            return result.more ? 0 : intervalMs;
          },
          (err: unknown) => {
            options.onError?.(err);
            return intervalMs;
          },
        )
        .then((next) => {
          running = undefined;
          schedule(next);
        });
    }, ms);
    timer.unref();
  }

  // first run soon after start: an instance restarted more often than the interval still prunes
  schedule(Math.min(intervalMs, 1000));

  return {
    /** Stops the schedule and waits for a run under way (its current batch), at most `waitMs`. */
    async stop(waitMs = 5000): Promise<void> {
      stopped = true;
      clearTimeout(timer);
      if (!running) return;
      let limit: NodeJS.Timeout | undefined;
      // a database that hangs must not hang the shutdown
      await Promise.race([
        running.catch(() => {}),
        new Promise<void>((resolve) => (limit = setTimeout(resolve, waitMs))),
      ]);
      clearTimeout(limit);
    },
  };
}

export type SessionPruner = ReturnType<typeof startSessionPruner>;
