import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import type { StatsRow } from '../../src/db/statsDimensions.js';
import { createStatsRecorder, type CountedVerify } from '../../src/server/statsRecorder.js';

const T0 = Date.parse('2026-11-27T12:00:10.000Z');

/** A recorder over an in-memory "database" whose writes fail while `down` is set. */
function setup(options: { maxPendingRows?: number; flushIntervalMs?: number } = {}) {
  let clock = T0;
  const stored: StatsRow[] = [];
  const state = {
    down: false,
    writes: 0,
    dropped: [] as { counts: number; minutes: number }[],
    onWritten: () => {},
  };
  const errors: unknown[] = [];
  const recorder = createStatsRecorder({
    write: async ({ rows }) => {
      state.writes++;
      if (state.down) throw new Error('database down');
      for (const r of rows) stored.push({ ...r });
      state.onWritten();
    },
    retentionSeconds: 3600,
    now: () => clock,
    ...options,
    onError: (err) => errors.push(err),
    onDropped: (d) => state.dropped.push(d),
  });
  const sum = (filter: (r: StatsRow) => boolean = () => true) =>
    stored.filter(filter).reduce((n, r) => n + r.count, 0);
  return {
    recorder,
    stored,
    state,
    errors,
    sum,
    advance: (ms: number) => (clock += ms),
  };
}

const verify = (result: CountedVerify['result'], app = 'ABCDE12345.com.example.bank') =>
  ({ apiKeyId: 'key0000000000001', mode: 'live', service: 'apple', app, result }) as const;

describe('the statistics recorder', () => {
  it('counts by minute, key, mode, service, app, outcome and reason, and writes each group once', async () => {
    const { recorder, stored } = setup();
    recorder.record(verify({ outcome: 'valid', observed: [] }));
    recorder.record(verify({ outcome: 'valid', observed: [] }));
    recorder.record(verify({ outcome: 'rejected', reason: 'apple_counter_replay' }));
    recorder.record(verify({ outcome: 'error' }));
    expect(recorder.pendingRows()).toBe(3);
    await recorder.flush();
    expect(recorder.pendingRows()).toBe(0);
    expect(stored.map(({ outcome, reason, count }) => ({ outcome, reason, count }))).toEqual([
      { outcome: 'valid', reason: '', count: 2 },
      { outcome: 'rejected', reason: 'apple_counter_replay', count: 1 },
      { outcome: 'error', reason: '', count: 1 },
    ]);
    expect(stored[0]!.minute.toISOString()).toBe('2026-11-27T12:00:00.000Z');
    // nothing pending: no write at all
    await recorder.flush();
    expect(stored).toHaveLength(3);
  });

  it('a valid verify with observed reasons is one valid row plus each distinct reason once as observed', async () => {
    const { recorder, stored } = setup();
    recorder.record(
      verify({
        outcome: 'valid',
        observed: ['apple_risk_exceeded', 'apple_environment_not_allowed', 'apple_risk_exceeded'],
      }),
    );
    await recorder.flush();
    expect(stored.map((r) => [r.outcome, r.reason, r.count])).toEqual([
      ['valid', '', 1],
      ['observed', 'apple_risk_exceeded', 1],
      ['observed', 'apple_environment_not_allowed', 1],
    ]);
  });

  it('the database down: the failed batch is kept as it was (its id), new counts wait beside it, and the next flush writes each once', async () => {
    const { recorder, state, stored, errors, sum } = setup();
    state.down = true;
    recorder.record(verify({ outcome: 'valid', observed: [] }));
    await recorder.flush();
    expect(errors).toHaveLength(1);
    expect(recorder.pendingRows()).toBe(1);
    recorder.record(verify({ outcome: 'valid', observed: [] }));
    await recorder.flush();
    expect(stored).toHaveLength(0);
    expect(recorder.pendingRows()).toBe(2);
    state.down = false;
    await recorder.flush();
    expect(sum()).toBe(2);
    // the failed batch again as it was, then the newer counts as a batch of their own
    expect(stored).toHaveLength(2);
    expect(recorder.pendingRows()).toBe(0);
  });

  it('bounded while the database is down: the oldest minutes are dropped first, and said', async () => {
    const { recorder, state, stored, advance } = setup({ maxPendingRows: 4 });
    state.down = true;
    // minute 0: 3 counts over 2 rows
    recorder.record(verify({ outcome: 'valid', observed: [] }));
    recorder.record(verify({ outcome: 'valid', observed: [] }));
    recorder.record(verify({ outcome: 'rejected', reason: 'apple_counter_replay' }));
    await recorder.flush();
    advance(60_000);
    // minute 1: 2 rows
    recorder.record(verify({ outcome: 'valid', observed: [] }, 'A'));
    recorder.record(verify({ outcome: 'valid', observed: [] }, 'B'));
    expect(state.dropped).toEqual([]);
    advance(60_000);
    // minute 2: the fifth row: minute 0 goes
    recorder.record(verify({ outcome: 'valid', observed: [] }, 'C'));
    expect(state.dropped).toEqual([{ counts: 3, rows: 2, minutes: 1 }]);
    expect(recorder.pendingRows()).toBe(3);
    state.down = false;
    await recorder.flush();
    expect(stored.map((r) => r.app).sort()).toEqual(['A', 'B', 'C']);
  });

  it('a flush that fails puts its rows back within the bound too', async () => {
    const { recorder, state, advance } = setup({ maxPendingRows: 2 });
    recorder.record(verify({ outcome: 'valid', observed: [] }, 'A'));
    advance(60_000);
    recorder.record(verify({ outcome: 'valid', observed: [] }, 'B'));
    state.down = true;
    // while the write is under way, a new minute arrives: putting the two back exceeds the bound
    const flushing = recorder.flush();
    advance(60_000);
    recorder.record(verify({ outcome: 'valid', observed: [] }, 'C'));
    await flushing;
    expect(recorder.pendingRows()).toBe(2);
    expect(state.dropped).toEqual([{ counts: 1, rows: 1, minutes: 1 }]);
  });

  it('writes on its own schedule, and stop writes what is left', async () => {
    const { recorder, state, sum } = setup({ flushIntervalMs: 20 });
    const flushed = new Promise<void>((resolve) => (state.onWritten = resolve));
    recorder.start();
    recorder.record(verify({ outcome: 'valid', observed: [] }));
    await flushed;
    expect(sum()).toBe(1);
    recorder.record(verify({ outcome: 'valid', observed: [] }));
    await recorder.stop();
    expect(sum()).toBe(2);
  });

  it('stop with the database down says how many counts were lost', async () => {
    const { recorder, state } = setup();
    state.down = true;
    recorder.record(verify({ outcome: 'valid', observed: [] }));
    recorder.record(verify({ outcome: 'rejected', reason: 'apple_counter_replay' }));
    await recorder.stop();
    expect(state.dropped).toEqual([{ counts: 2, rows: 2, minutes: 1 }]);
  });

  it('two flushes at once write one after the other, never the same rows twice', async () => {
    const { recorder, stored, sum } = setup();
    recorder.record(verify({ outcome: 'valid', observed: [] }));
    const a = recorder.flush();
    recorder.record(verify({ outcome: 'valid', observed: [] }));
    const b = recorder.flush();
    await Promise.all([a, b]);
    expect(sum()).toBe(2);
    expect(stored.length).toBeLessThanOrEqual(2);
  });
});

describe('retention', () => {
  it('prunes the minutes older than the retention, on its schedule', async () => {
    const cutoffs: Date[] = [];
    let pruned!: () => void;
    const done = new Promise<void>((resolve) => (pruned = resolve));
    const recorder = createStatsRecorder({
      write: async () => {},
      prune: async (cutoff) => {
        cutoffs.push(cutoff);
        return 3;
      },
      retentionSeconds: 35 * 86_400,
      pruneIntervalMs: 10,
      now: () => T0,
      onPruned: (deleted) => {
        expect(deleted).toBe(3);
        pruned();
      },
    });
    recorder.start();
    await done;
    await recorder.stop();
    expect(cutoffs[0]!.toISOString()).toBe(new Date(T0 - 35 * 86_400_000).toISOString());
  });

  it('ATTEST_STATS_RETENTION: default 35d, a duration, else a configuration error', () => {
    expect(loadConfig({}, {}).statsRetentionSeconds).toBe(35 * 86_400);
    expect(loadConfig({}, { ATTEST_STATS_RETENTION: '7d' }).statsRetentionSeconds).toBe(7 * 86_400);
    expect(() => loadConfig({}, { ATTEST_STATS_RETENTION: '35' })).toThrow(
      /ATTEST_STATS_RETENTION must be a duration such as 7d, 35d or 12w, got "35"/,
    );
    expect(loadConfig({}, {}).stats).toBe(true);
    expect(loadConfig({}, { ATTEST_STATS: 'off' }).stats).toBe(false);
    expect(() => loadConfig({}, { ATTEST_STATS: 'maybe' })).toThrow(/ATTEST_STATS must be/);
  });
});

describe('a cluster primary gathering its workers’ counts (merge)', () => {
  it('adds each worker’s rows to its own, and writes every group once with the sum', async () => {
    const primary = setup();
    // a worker's recorder hands its rows over (serialised, as over IPC) instead of writing them
    const worker = () =>
      createStatsRecorder({
        write: async (batch) =>
          primary.recorder.merge(
            (JSON.parse(JSON.stringify(batch.rows)) as (StatsRow & { minute: string })[]).map(
              (r) => ({
                ...r,
                minute: new Date(r.minute),
              }),
            ),
          ),
        retentionSeconds: 3600,
        now: () => T0,
      });
    const [a, b] = [worker(), worker()];
    a.record(verify({ outcome: 'valid', observed: [] }));
    a.record(verify({ outcome: 'rejected', reason: 'apple_counter_replay' }));
    b.record(verify({ outcome: 'valid', observed: [] }));
    b.record(verify({ outcome: 'valid', observed: [] }));
    await Promise.all([a.flush(), b.flush()]);
    expect(primary.recorder.pendingRows()).toBe(2);
    // handing over twice what was handed once adds nothing: a flushed worker has nothing pending
    await a.flush();
    await primary.recorder.flush();
    expect(primary.state.writes).toBe(1);
    expect(
      primary.stored.map(({ outcome, reason, count, minute }) => ({
        outcome,
        reason,
        count,
        minute: minute.toISOString(),
      })),
    ).toEqual([
      { outcome: 'valid', reason: '', count: 3, minute: '2026-11-27T12:00:00.000Z' },
      {
        outcome: 'rejected',
        reason: 'apple_counter_replay',
        count: 1,
        minute: '2026-11-27T12:00:00.000Z',
      },
    ]);
  });
});
