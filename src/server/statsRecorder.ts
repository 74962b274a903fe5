import { randomUUID } from 'node:crypto';
import type { KeyMode } from '../core/ports.js';
import type { DeviceRow, StatsBatch, StatsRow } from '../db/statsDimensions.js';

/** What one answered verify adds to the statistics. */
export interface CountedVerify {
  /** '' when the request failed before its key was known */
  apiKeyId: string;
  mode: KeyMode | '';
  /** undefined when the token named none */
  service: string | undefined;
  /** the App Attest app ID or Android package (`other` when not allowlisted); undefined when unknown */
  app: string | undefined;
  /** the device the evidence names (deviceOf), for the rollout's distinct devices; valid verifies only */
  device?: string | undefined;
  /**
   * valid (with the reasons of the observed rules that failed: each also counts once as
   * `observed`), rejected (with its reason), or error (answered 5xx)
   */
  result:
    | { outcome: 'valid'; observed: readonly string[] }
    | { outcome: 'rejected'; reason: string }
    | { outcome: 'error' };
}

export interface StatsRecorderOptions {
  /**
   * adds a batch to the database, all or none, at most once per batch id (db/verificationStats.ts
   * add): a batch that failed is sent again as it was, under its id
   */
  write(batch: StatsBatch): Promise<void>;
  /** this recorder's part of every batch id (default: a random UUID per recorder) */
  instanceId?: string;
  /** deletes the counts of minutes before the cutoff; null: another instance is at it */
  prune?(cutoff: Date): Promise<number | null>;
  /** how long counts are kept in the database */
  retentionSeconds: number;
  /** how often the counts are written (default 10 s: what a crash may lose) */
  flushIntervalMs?: number;
  /** how often old counts are deleted (default 10 min) */
  pruneIntervalMs?: number;
  /**
   * the most rows (minute x key x mode x service x app x outcome x reason) kept in memory while
   * the database cannot take them; beyond it the oldest minutes are dropped
   */
  maxPendingRows?: number;
  now?: () => number;
  /** a flush failed: its counts are kept for the next one */
  onError?(err: unknown, pendingRows: number): void;
  /** counts were thrown away to keep within maxPendingRows (or could not be written at stop) */
  onDropped?(dropped: { counts: number; rows: number; minutes: number }): void;
  /** after each write that succeeded (tests wait on it) */
  onFlush?(rows: number): void;
  onPruned?(deleted: number): void;
  onPruneError?(err: unknown): void;
}

const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;
const SEPARATOR = '\u0000';

/**
 * Counts verifications in memory and adds them to the database every `flushIntervalMs`, so the
 * request itself never waits on a write. While the database is down the counts stay in memory
 * (bounded: the oldest minutes go first) and the next flush retries them.
 */
export function createStatsRecorder(options: StatsRecorderOptions) {
  const now = options.now ?? Date.now;
  const flushIntervalMs = options.flushIntervalMs ?? 10_000;
  const pruneIntervalMs = options.pruneIntervalMs ?? 600_000;
  const maxRows = options.maxPendingRows ?? 20_000;
  /** minute (ms) -> row key -> row; a Map keeps insertion order, but minutes are sorted when dropping */
  let pending = new Map<number, Map<string, StatsRow>>();
  let pendingRows = 0;
  /** devices seen since the last batch: one row per day x app x mode x service x device x reason */
  let devices = new Map<string, DeviceRow>();
  /** devices not noted since the last batch because `devices` was full (reported once per batch) */
  let droppedDevices = 0;
  const instanceId = options.instanceId ?? randomUUID();
  let sequence = 0;
  /**
   * the batch whose write failed: it may have committed (only its answer lost), so it is sent
   * again as it was, under its id, before anything else; never merged with newer counts
   */
  let unsent: StatsBatch | undefined;
  let flushing: Promise<void> | undefined;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let pruneTimer: NodeJS.Timeout | undefined;

  const keyOf = (r: Omit<StatsRow, 'count' | 'minute'>) =>
    `${r.apiKeyId}${SEPARATOR}${r.mode}${SEPARATOR}${r.service}${SEPARATOR}${r.app}${SEPARATOR}${r.outcome}${SEPARATOR}${r.reason}`;

  /** Adds `count` to the row of `key` in `minute`; `make` builds the row the first time only. */
  function add(minute: number, key: string, make: () => StatsRow, count: number): void {
    let rows = pending.get(minute);
    if (!rows) pending.set(minute, (rows = new Map()));
    const existing = rows.get(key);
    if (existing) {
      existing.count += count;
      return;
    }
    const row = make();
    row.count = count;
    rows.set(key, row);
    pendingRows++;
    if (totalRows() > maxRows) dropOldest();
  }

  /**
   * Drops whole minutes, oldest first, until the rows fit again: the failed batch's rows too (a
   * batch retried with fewer rows still counts at most once under its id; if its first try had
   * committed, its dropped rows were written after all).
   */
  function dropOldest(): void {
    const minutes = new Set(pending.keys());
    for (const row of unsent?.rows ?? []) minutes.add(row.minute.getTime());
    let counts = 0;
    let rows = 0;
    let dropped = 0;
    for (const minute of [...minutes].sort((a, b) => a - b)) {
      if (totalRows() <= maxRows) break;
      // the current minute alone beyond the bound: drop it too rather than grow without limit
      const group = pending.get(minute);
      if (group) {
        for (const row of group.values()) counts += row.count;
        rows += group.size;
        pendingRows -= group.size;
        pending.delete(minute);
      }
      if (unsent) {
        const kept = unsent.rows.filter((row) => row.minute.getTime() !== minute);
        for (const row of unsent.rows) if (row.minute.getTime() === minute) counts += row.count;
        rows += unsent.rows.length - kept.length;
        unsent = kept.length > 0 ? { id: unsent.id, rows: kept } : undefined;
      }
      dropped++;
    }
    if (dropped > 0) options.onDropped?.({ counts, rows, minutes: dropped });
  }

  const totalRows = () => pendingRows + (unsent?.rows.length ?? 0);

  /**
   * Notes a device seen (the latest time per day). Bounded like the counts: beyond maxRows new
   * devices are not noted (their verifies are still counted) and reported as dropped with the
   * next batch.
   */
  function seen(row: DeviceRow): void {
    const key = `${row.day.getTime()}${SEPARATOR}${row.app}${SEPARATOR}${row.reason}${SEPARATOR}${row.mode}${SEPARATOR}${row.service}${SEPARATOR}${row.device}`;
    const existing = devices.get(key);
    if (existing) {
      if (row.lastAt > existing.lastAt) existing.lastAt = row.lastAt;
      return;
    }
    if (devices.size >= maxRows) {
      droppedDevices++;
      return;
    }
    devices.set(key, row);
  }

  // on every verify: a key string and a map lookup; a row object only for a new group
  function record(verify: CountedVerify): void {
    const minute = Math.floor(now() / MINUTE_MS) * MINUTE_MS;
    const service = verify.service ?? '';
    const app = verify.app ?? '';
    const r = verify.result;
    const one = (outcome: StatsRow['outcome'], reason: string) => {
      const group = { apiKeyId: verify.apiKeyId, mode: verify.mode, service, app, outcome, reason };
      add(minute, keyOf(group), () => ({ ...group, minute: new Date(minute), count: 0 }), 1);
    };
    if (r.outcome === 'rejected') return one('rejected', r.reason);
    one(r.outcome, '');
    // each observed reason once, even if a rule reported it twice
    if (r.outcome === 'valid' && r.observed.length > 0)
      for (const reason of new Set(r.observed)) one('observed', reason);
    if (r.outcome === 'valid' && verify.device && verify.mode) {
      const at = now();
      const base = {
        day: new Date(Math.floor(at / DAY_MS) * DAY_MS),
        app,
        mode: verify.mode,
        service,
        device: verify.device,
      };
      seen({ ...base, reason: '', lastAt: new Date(at) });
      for (const reason of new Set(r.observed)) seen({ ...base, reason, lastAt: new Date(at) });
    }
  }

  /**
   * Sends the batch that failed last time, as it was, then what is pending as a new batch. A batch
   * that fails is kept whole for the next flush: the database applies each id once, so a write
   * that committed but whose answer was lost is not counted twice.
   */
  async function writePending(): Promise<void> {
    if (!unsent) {
      if (pendingRows === 0 && devices.size === 0) return;
      const taken = pending;
      const takenDevices = devices;
      pending = new Map();
      pendingRows = 0;
      devices = new Map();
      // once per batch, not once per verify: a full map under load would log on every request
      if (droppedDevices > 0) {
        options.onDropped?.({ counts: 0, rows: droppedDevices, minutes: 0 });
        droppedDevices = 0;
      }
      unsent = {
        id: `${instanceId}:${++sequence}`,
        rows: [...taken.values()].flatMap((group) => [...group.values()]),
        ...(takenDevices.size > 0 ? { devices: [...takenDevices.values()] } : {}),
      };
    }
    const batch = unsent;
    try {
      await options.write(batch);
    } catch (err) {
      options.onError?.(err, totalRows());
      return;
    }
    // (rows dropped for the bound meanwhile made `unsent` a smaller copy: written or not, done)
    if (unsent?.id === batch.id) unsent = undefined;
    options.onFlush?.(batch.rows.length);
    // the counts that came in meanwhile (or while the failed batch waited)
    if (pendingRows > 0 || devices.size > 0) await writePending();
  }

  /** One flush at a time: a second caller waits for the one under way, then flushes again. */
  function flush(): Promise<void> {
    const run = (flushing ?? Promise.resolve()).then(writePending);
    const settled = run.finally(() => {
      if (flushing === settled) flushing = undefined;
    });
    flushing = settled;
    return settled;
  }

  function schedule(): void {
    if (stopped) return;
    timer = setTimeout(() => void flush().finally(schedule), flushIntervalMs);
    timer.unref();
  }

  async function pruneOnce(): Promise<void> {
    if (!options.prune) return;
    const deleted = await options.prune(new Date(now() - options.retentionSeconds * 1000));
    if (deleted !== null) options.onPruned?.(deleted);
  }

  function schedulePrune(ms: number): void {
    if (stopped || !options.prune) return;
    pruneTimer = setTimeout(() => {
      pruneOnce().then(
        () => schedulePrune(pruneIntervalMs),
        (err: unknown) => {
          options.onPruneError?.(err);
          schedulePrune(pruneIntervalMs);
        },
      );
    }, ms);
    pruneTimer.unref();
  }

  /** Adds rows counted elsewhere: a cluster's primary gathers its workers' counts here. */
  function merge(rows: readonly StatsRow[], seenDevices: readonly DeviceRow[] = []): void {
    for (const row of rows) add(row.minute.getTime(), keyOf(row), () => ({ ...row }), row.count);
    for (const device of seenDevices) seen({ ...device });
  }

  return {
    record,
    merge,
    /** Writes the pending counts now (tests; the schedule does it every flushIntervalMs). */
    flush,
    /** Deletes the counts older than the retention now. */
    prune: pruneOnce,
    /** rows waiting to be written (a failed batch's included) */
    pendingRows: () => totalRows(),
    start(): void {
      schedule();
      // soon after start: an instance restarted more often than the interval still prunes
      schedulePrune(Math.min(pruneIntervalMs, 5000));
    },
    /**
     * Stops the schedule and writes what is pending, waiting at most `waitMs` (a database that
     * hangs must not hang the shutdown). Counts it could not write are reported as dropped.
     */
    async stop(waitMs = 5000): Promise<void> {
      stopped = true;
      clearTimeout(timer);
      clearTimeout(pruneTimer);
      let limit: NodeJS.Timeout | undefined;
      await Promise.race([
        flush().catch(() => {}),
        new Promise<void>((resolve) => (limit = setTimeout(resolve, waitMs))),
      ]);
      clearTimeout(limit);
      if (pendingRows > 0 || unsent || devices.size > 0) {
        let counts = 0;
        const minutes = new Set(pending.keys());
        for (const group of pending.values()) for (const row of group.values()) counts += row.count;
        for (const row of unsent?.rows ?? []) {
          counts += row.count;
          minutes.add(row.minute.getTime());
        }
        options.onDropped?.({ counts, rows: totalRows(), minutes: minutes.size });
      }
    },
  };
}

export type StatsRecorder = ReturnType<typeof createStatsRecorder>;
