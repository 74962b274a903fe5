/**
 * The change feed's polling mode (ATTEST_CHANGE_FEED=poll, or a pooler in transaction mode): the
 * change_notify triggers number each change in commit order in attest_changes, keep the latest
 * 1000, and a poller tells of each changed table once, resyncs after a failed poll, and never
 * polls twice within its interval. On both backends.
 */
import { sql } from 'drizzle-orm';
import { afterEach, describe, expect, it } from 'vitest';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import { startChangeFeed, type ChangeFeed } from '../../src/db/changeFeed.js';
import { rowsOf, type DatabaseHandle } from '../../src/db/database.js';
import { backends, clientOf, useDatabase } from '../support/databases.js';

const POLLING = {
  feed: 'poll' as const,
  why: 'test',
  startupTimeout: true,
  transactionPooled: true,
};

/** the handle, with its statements seen (and failed while `failing.on`) */
function watched(db: DatabaseHandle, failing = { on: false }) {
  const polls: number[] = [];
  const client = (db.db as unknown as { $client: { unsafe: (...a: unknown[]) => unknown } })
    .$client;
  const spy = new Proxy(client, {
    get(target, key) {
      if (key !== 'unsafe') return Reflect.get(target, key);
      return (text: string, ...rest: unknown[]) => {
        if (text.includes('from attest_changes')) {
          polls.push(performance.now());
          if (failing.on) return Promise.reject(new Error('connection lost'));
        }
        return target.unsafe(text, ...rest);
      };
    },
  });
  const dbSpy = new Proxy(db.db, {
    get: (target, key) => (key === '$client' ? spy : Reflect.get(target, key)),
  });
  return { handle: { ...db, db: dbSpy, connections: POLLING } as DatabaseHandle, polls };
}

function recorder() {
  const events: string[] = [];
  const waiters: { match: string; resolve: () => void }[] = [];
  const push = (e: string) => {
    events.push(e);
    for (const w of waiters.splice(0))
      if (w.match === e) w.resolve();
      else waiters.push(w);
  };
  return {
    events,
    listener: { onChange: (t: string) => push(t), onResync: () => push('resync') },
    /** resolves at the next `event` (or at once if one came after `from`) */
    next(event: string, from = 0) {
      if (events.slice(from).includes(event)) return Promise.resolve();
      return new Promise<void>((resolve) => waiters.push({ match: event, resolve }));
    },
  };
}

describe.each(backends())('the polled change feed on $name', (backend) => {
  const db = useDatabase(backend);
  let feed: ChangeFeed | null = null;
  afterEach(async () => {
    await feed?.stop();
    feed = null;
  });

  it('resyncs once at start, then tells of each changed table, and of nothing made before it started', async () => {
    const repo = createAllowlistRepository(db.db, null);
    await repo.addApple('ABCDE12345.com.example.before', undefined);
    const { handle, polls } = watched(db);
    const seen = recorder();
    feed = await startChangeFeed(handle, seen.listener, { intervalMs: 20 });
    expect(feed?.mode).toBe('poll');
    while (polls.length < 2) await new Promise((r) => setTimeout(r, 5));
    expect(seen.events).toEqual(['resync']);
    await repo.addApple('ABCDE12345.com.example.one', undefined);
    await repo.addApple('ABCDE12345.com.example.two', undefined);
    await seen.next('apple_apps');
    const told = seen.events.filter((e) => e === 'apple_apps').length;
    // one per poll that found changes of the table: the two inserts in one poll or in two
    expect(told).toBeGreaterThanOrEqual(1);
    expect(told).toBeLessThanOrEqual(2);
    expect(seen.events.filter((e) => e !== 'apple_apps')).toEqual(['resync']);
  });

  it('a failed poll is told once; the next good poll resyncs, and a change made meanwhile is told', async () => {
    const failing = { on: false };
    const { handle, polls } = watched(db, failing);
    const seen = recorder();
    const errors: unknown[] = [];
    feed = await startChangeFeed(handle, seen.listener, {
      intervalMs: 10,
      onPollError: (err) => errors.push(err),
    });
    failing.on = true;
    const failedFrom = polls.length;
    // three failed polls: one error told
    while (polls.length < failedFrom + 3) await new Promise((r) => setImmediate(r));
    await createAllowlistRepository(db.db, null).addApple('ABCDE12345.com.example.gap', undefined);
    const mark = seen.events.length;
    failing.on = false;
    await seen.next('apple_apps', mark);
    expect(errors).toHaveLength(1);
    expect(seen.events.slice(mark)).toEqual(['resync', 'apple_apps']);
  });

  it('never polls twice within its interval, nor after stop', async () => {
    const { handle, polls } = watched(db);
    feed = await startChangeFeed(handle, recorder().listener, { intervalMs: 30 });
    while (polls.length < 4) await new Promise((r) => setTimeout(r, 5));
    await feed!.stop();
    const stoppedAt = polls.length;
    for (let i = 1; i < polls.length; i++)
      expect(polls[i]! - polls[i - 1]!).toBeGreaterThanOrEqual(29);
    await new Promise((r) => setTimeout(r, 100));
    expect(polls.length).toBe(stoppedAt);
    feed = null;
  });

  it('numbers changes in commit order: a second change waits for the first to commit', async () => {
    const first = clientOf(db.url!, { max: 1 });
    const second = clientOf(db.url!, { max: 1 });
    try {
      const order: string[] = [];
      let release = () => {};
      const held = new Promise<void>((r) => (release = r));
      let begun = () => {};
      const inside = new Promise<void>((r) => (begun = r));
      const one = first.begin(async (tx) => {
        await tx`insert into apple_apps (app_id, env) values ('ABCDE12345.com.example.first', 'any')`;
        begun();
        await held;
        order.push('first commits');
      });
      // a failed insert ends the wait too (and fails the test) rather than hanging it
      await Promise.race([inside, one]);
      const two =
        second`insert into apple_apps (app_id, env) values ('ABCDE12345.com.example.second', 'any')`.then(
          () => order.push('second done'),
        );
      // the second insert's trigger waits on the version row the first holds
      const waiting = async () => {
        for (;;) {
          const rows = rowsOf<{ n: string | number }>(
            await db.db.execute(
              sql`select count(*) as n from pg_stat_activity where wait_event_type = 'Lock' and datname = current_database()`,
            ),
          );
          if (Number(rows[0]!.n) > 0) return;
          await new Promise((r) => setTimeout(r, 5));
        }
      };
      await waiting();
      release();
      await Promise.all([one, two]);
      expect(order).toEqual(['first commits', 'second done']);
      const rows = rowsOf<{ version: string | number; table_name: string }>(
        await db.db.execute(sql`select version, table_name from attest_changes order by version`),
      );
      const versions = rows.map((r) => Number(r.version));
      expect(versions).toEqual([...versions].sort((x, y) => x - y));
      expect(new Set(versions).size).toBe(versions.length);
    } finally {
      await Promise.all([first.end(), second.end()]);
    }
  });

  it('keeps only the latest 1000 changes', async () => {
    await db.db.execute(
      sql`do $$ begin for i in 1..1100 loop update apple_apps set app_id = app_id where false; end loop; end $$`,
    );
    const rows = rowsOf<{ n: string | number; lo: string | number; hi: string | number }>(
      await db.db.execute(
        sql`select count(*) as n, min(version) as lo, max(version) as hi from attest_changes`,
      ),
    );
    expect(Number(rows[0]!.n)).toBe(1000);
    expect(Number(rows[0]!.hi) - Number(rows[0]!.lo)).toBe(999);
  });
});
