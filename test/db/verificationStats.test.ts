import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { rowsOf } from '../../src/db/database.js';
import type { StatsRow } from '../../src/db/statsDimensions.js';
import { createVerificationStatsRepository } from '../../src/db/verificationStats.js';
import { createStatsRecorder, type CountedVerify } from '../../src/server/statsRecorder.js';
import { backends, useDatabase } from '../support/databases.js';

const MINUTE = Date.parse('2026-11-27T12:00:00.000Z');
const APP = 'ABCDE12345.com.example.bank';
const PKG = 'com.example.game';

const row = (over: Partial<StatsRow>): StatsRow => ({
  minute: new Date(MINUTE),
  apiKeyId: 'key0000000000001',
  mode: 'live',
  service: 'apple',
  app: APP,
  outcome: 'valid',
  reason: '',
  count: 1,
  ...over,
});

const window = { since: new Date(MINUTE - 3600_000), until: new Date(MINUTE + 3600_000) };

describe.each(backends())('verification statistics on $name', (backend) => {
  const db = useDatabase(backend);
  const repo = () => createVerificationStatsRepository(db.db);
  let batches = 0;
  /** a batch of its own each time (the recorder's batches have unique ids too) */
  const add = (rows: StatsRow[]) => repo().add({ id: `test:${++batches}`, rows });

  it('adds counts to the stored ones (the same key twice sums) and sums them by app, outcome and reason', async () => {
    await add([
      row({ count: 3 }),
      row({ outcome: 'rejected', reason: 'apple_counter_replay', count: 2 }),
    ]);
    await add([
      row({ count: 4 }),
      row({ minute: new Date(MINUTE + 60_000), count: 1 }),
      row({ outcome: 'observed', reason: 'apple_risk_exceeded', count: 1 }),
      row({ service: 'gms', app: PKG, outcome: 'rejected', reason: 'gms_play_protect', count: 5 }),
      row({ app: '', service: '', outcome: 'error', count: 1 }),
    ]);
    const totals = await repo().totals({ ...window, by: 'app' });
    expect(totals).toEqual([
      { value: APP, mode: 'live', outcome: 'observed', reason: 'apple_risk_exceeded', count: 1 },
      { value: APP, mode: 'live', outcome: 'rejected', reason: 'apple_counter_replay', count: 2 },
      { value: APP, mode: 'live', outcome: 'valid', reason: null, count: 8 },
      { value: PKG, mode: 'live', outcome: 'rejected', reason: 'gms_play_protect', count: 5 },
      { value: null, mode: 'live', outcome: 'error', reason: null, count: 1 },
    ]);
  });

  it('--by key, service, reason and minute; filters by app, key and service; the window bounds the minutes', async () => {
    await add([
      row({ count: 2 }),
      row({ apiKeyId: 'key0000000000002', count: 3 }),
      row({ service: 'gms', app: PKG, minute: new Date(MINUTE + 120_000), count: 7 }),
      // outside the window
      row({ minute: new Date(MINUTE - 7200_000), count: 100 }),
    ]);
    const sum = (t: { count: number }[]) => t.reduce((n, x) => n + x.count, 0);
    expect(await repo().totals({ ...window, by: 'key' })).toEqual([
      { value: 'key0000000000001', mode: 'live', outcome: 'valid', reason: null, count: 9 },
      { value: 'key0000000000002', mode: 'live', outcome: 'valid', reason: null, count: 3 },
    ]);
    expect(await repo().totals({ ...window, by: 'service' })).toEqual([
      { value: 'apple', mode: 'live', outcome: 'valid', reason: null, count: 5 },
      { value: 'gms', mode: 'live', outcome: 'valid', reason: null, count: 7 },
    ]);
    expect(await repo().totals({ ...window, by: 'minute' })).toEqual([
      { value: '2026-11-27T12:00:00Z', mode: 'live', outcome: 'valid', reason: null, count: 5 },
      { value: '2026-11-27T12:02:00Z', mode: 'live', outcome: 'valid', reason: null, count: 7 },
    ]);
    expect(await repo().totals({ ...window, by: 'reason' })).toEqual([
      { value: null, mode: 'live', outcome: 'valid', reason: null, count: 12 },
    ]);
    expect(sum(await repo().totals({ ...window, by: 'app', app: PKG }))).toBe(7);
    expect(sum(await repo().totals({ ...window, by: 'app', apiKeyId: 'key0000000000002' }))).toBe(
      3,
    );
    expect(sum(await repo().totals({ ...window, by: 'app', service: 'apple' }))).toBe(5);
    // the minute of `since` counts whole: 12:00:30 still takes the 12:00 row
    expect(
      sum(
        await repo().totals({
          since: new Date(MINUTE + 30_000),
          until: new Date(MINUTE + 60_000),
          by: 'app',
        }),
      ),
    ).toBe(5);
    expect(
      sum(await repo().totals({ ...window, since: new Date(MINUTE - 8000_000), by: 'app' })),
    ).toBe(112);
  });

  it('retention: prune deletes the minutes before the cutoff only', async () => {
    await add([
      row({ minute: new Date(MINUTE - 40 * 86_400_000), count: 1 }),
      row({ minute: new Date(MINUTE - 86_400_000), count: 2 }),
      row({ count: 3 }),
    ]);
    expect(await repo().prune(new Date(MINUTE - 35 * 86_400_000))).toBe(1);
    expect(await repo().prune(new Date(MINUTE - 35 * 86_400_000))).toBe(0);
    if (backend.name === 'postgres') {
      await add([row({ minute: new Date(MINUTE - 40 * 86_400_000), count: 1 })]);
      const cutoff = new Date(MINUTE - 35 * 86_400_000);
      expect(await repo().prune(cutoff, { advisoryLock: true })).toBe(1);
      // another instance holds the prune lock: this one skips the round
      await db.db.transaction(async (tx) => {
        await tx.execute(sql`select pg_advisory_xact_lock(${0x76737470})`);
        expect(await repo().prune(cutoff, { advisoryLock: true })).toBeNull();
      });
    }
    const all = await repo().totals({
      since: new Date(MINUTE - 50 * 86_400_000),
      until: new Date(MINUTE),
      by: 'app',
    });
    expect(all.map((t) => t.count)).toEqual([5]);
  });

  it('two instances (two recorders on one database) add up, also when they write the same rows at once', async () => {
    const events: string[] = [];
    const recorder = (name: string) =>
      createStatsRecorder({
        write: (batch) => repo().add(batch),
        retentionSeconds: 3600,
        now: () => MINUTE + 5000,
        onFlush: () => events.push(name),
      });
    const a = recorder('a');
    const b = recorder('b');
    const verify = (result: CountedVerify['result'], app = APP): CountedVerify => ({
      apiKeyId: 'key0000000000001',
      mode: 'live',
      service: 'apple',
      app,
      result,
    });
    for (let i = 0; i < 50; i++) {
      // the same keys on both, in opposite orders: one statement each, no deadlock
      a.record(verify({ outcome: 'valid', observed: [] }, `app${i}`));
      b.record(verify({ outcome: 'valid', observed: [] }, `app${49 - i}`));
    }
    a.record(verify({ outcome: 'rejected', reason: 'apple_counter_replay' }));
    b.record(verify({ outcome: 'valid', observed: ['apple_risk_exceeded'] }));
    await Promise.all([a.flush(), b.flush()]);
    expect(events.sort()).toEqual(['a', 'b']);
    const totals = await repo().totals({ ...window, by: 'app' });
    expect(totals.filter((t) => t.value?.startsWith('app')).map((t) => t.count)).toEqual(
      Array(50).fill(2),
    );
    expect(totals.filter((t) => t.value === APP)).toEqual([
      { value: APP, mode: 'live', outcome: 'observed', reason: 'apple_risk_exceeded', count: 1 },
      { value: APP, mode: 'live', outcome: 'rejected', reason: 'apple_counter_replay', count: 1 },
      { value: APP, mode: 'live', outcome: 'valid', reason: null, count: 1 },
    ]);
  });

  it('the database down: the recorder keeps its counts and the flush after it writes them once', async () => {
    let down = true;
    const errors: unknown[] = [];
    const recorder = createStatsRecorder({
      write: (batch) =>
        down ? Promise.reject(new Error('connection refused')) : repo().add(batch),
      retentionSeconds: 3600,
      now: () => MINUTE,
      onError: (err) => errors.push(err),
    });
    recorder.record({
      apiKeyId: 'key0000000000001',
      mode: 'test',
      service: 'gms',
      app: PKG,
      result: { outcome: 'error' },
    });
    await recorder.flush();
    await recorder.flush();
    expect(errors).toHaveLength(2);
    down = false;
    await recorder.flush();
    await recorder.flush();
    expect(await repo().totals({ ...window, by: 'app', mode: 'test' })).toEqual([
      { value: PKG, mode: 'test', outcome: 'error', reason: null, count: 1 },
    ]);
    // a test key's count is in no live figure
    expect(await repo().totals({ ...window, by: 'app' })).toEqual([]);
  });

  it('a flush whose statement committed but whose answer was lost is retried and counted once (batch ids)', async () => {
    let lose = 2;
    const tries: string[] = [];
    const recorder = createStatsRecorder({
      // the statement runs, then the connection "resets": the recorder cannot tell it committed
      write: async (batch) => {
        tries.push(batch.id);
        await repo().add(batch);
        if (lose-- > 0) throw new Error('read ECONNRESET');
      },
      retentionSeconds: 3600,
      now: () => MINUTE,
      instanceId: 'instance-a',
    });
    const verify: CountedVerify = {
      apiKeyId: 'key0000000000001',
      mode: 'live',
      service: 'apple',
      app: APP,
      result: { outcome: 'valid', observed: [] },
    };
    for (let i = 0; i < 7; i++) recorder.record(verify);
    await recorder.flush();
    // counts that arrive while the first batch waits go in a batch of their own
    for (let i = 0; i < 3; i++) recorder.record(verify);
    await recorder.flush();
    expect(recorder.pendingRows()).toBeGreaterThan(0);
    await recorder.flush();
    expect(recorder.pendingRows()).toBe(0);
    expect(tries).toEqual(['instance-a:1', 'instance-a:1', 'instance-a:1', 'instance-a:2']);
    expect(await repo().totals({ ...window, by: 'app' })).toEqual([
      { value: APP, mode: 'live', outcome: 'valid', reason: null, count: 10 },
    ]);
  });

  it('one batch id sent twice at once, or again later, adds its counts once', async () => {
    const batch = { id: 'instance-b:1', rows: [row({ count: 5 })] };
    await Promise.all([repo().add(batch), repo().add(batch)]);
    await repo().add(batch);
    await repo().add({ id: 'instance-b:2', rows: [row({ count: 1 })] });
    expect(await repo().totals({ ...window, by: 'app' })).toEqual([
      { value: APP, mode: 'live', outcome: 'valid', reason: null, count: 6 },
    ]);
    // pruned with the counts' retention
    await repo().prune(new Date(Date.now() + 60_000));
    const left = rowsOf<{ n: number }>(
      await db.db.execute(sql`select count(*)::int as n from verification_stats_batches`),
    );
    expect(left).toEqual([{ n: 0 }]);
  });

  it('devices: recorded per day from valid verifies with a key, idempotent when a batch comes again, counted distinct per rule, pruned', async () => {
    const device = (n: number) => n.toString(16).padStart(32, '0');
    let clock = MINUTE + 5 * 60_000;
    const batches: import('../../src/db/statsDimensions.js').StatsBatch[] = [];
    const recorder = createStatsRecorder({
      write: async (batch) => {
        batches.push(batch);
        await repo().add(batch);
      },
      retentionSeconds: 86_400,
      now: () => clock,
    });
    const verify = (
      n: number | undefined,
      result: CountedVerify['result'],
      service = 'apple',
    ): CountedVerify => ({
      apiKeyId: 'key0000000000001',
      mode: 'live',
      service,
      app: APP,
      ...(n === undefined ? {} : { device: device(n) }),
      result,
    });
    // the rule is observed at MINUTE (an audit event of the app's row)
    await db.db.execute(sql`insert into apple_apps (app_id, env, observe)
      values (${APP}, 'production', array['apple_risk_exceeded'])`);
    await db.db.execute(sql`insert into audit_events (actor, action, target, before, after, at)
      values ('t', 'allowlist.update', ${`apple:${APP}`}, '{"observe":[]}'::jsonb,
              '{"observe":["apple_risk_exceeded"]}'::jsonb, ${new Date(MINUTE).toISOString()}::timestamptz)`);
    const risky = { outcome: 'valid' as const, observed: ['apple_risk_exceeded'] };
    const fine = { outcome: 'valid' as const, observed: [] };
    // device 1 three times (twice risky), device 2 once, device 3 rejected, a Play verify with no device
    recorder.record(verify(1, risky));
    recorder.record(verify(1, risky));
    clock += 60_000;
    recorder.record(verify(1, fine));
    recorder.record(verify(2, fine));
    recorder.record(verify(3, { outcome: 'rejected', reason: 'apple_counter_replay' }));
    recorder.record(verify(undefined, fine, 'gms'));
    await recorder.flush();
    expect(batches).toHaveLength(1);
    // one row a day per device and outcome: device 1 valid (its latest time) and risky, device 2 valid
    expect(
      batches[0]!.devices!.map((d) => [d.device.slice(-1), d.reason, d.lastAt.getTime()]),
    ).toEqual([
      ['1', '', MINUTE + 6 * 60_000],
      ['1', 'apple_risk_exceeded', MINUTE + 5 * 60_000],
      ['2', '', MINUTE + 6 * 60_000],
    ]);
    const until = new Date(MINUTE + 3600_000);
    const expected = {
      app: APP,
      reason: 'apple_risk_exceeded',
      verifies: 6,
      valid: 5,
      wouldReject: 2,
      devices: 2,
      wouldRejectDevices: 1,
    };
    expect(await repo().rollout({ until })).toMatchObject([expected]);
    // the same batch again (its answer lost) and another instance noting device 2 again: no change
    await repo().add(batches[0]!);
    await repo().add({ id: 'other:1', rows: [], devices: [batches[0]!.devices![2]!] });
    expect(await repo().rollout({ until })).toMatchObject([expected]);
    // a window ending before the devices were seen counts none of them
    expect(await repo().rollout({ until: new Date(MINUTE + 60_000) })).toMatchObject([
      { devices: 0, wouldRejectDevices: 0 },
    ]);
    // retention: a device row last seen before the cutoff goes (device 1's risky row), later ones stay
    await repo().prune(new Date(MINUTE + 6 * 60_000));
    expect(await repo().rollout({ until })).toMatchObject([{ devices: 2, wouldRejectDevices: 0 }]);
  });
});
