import { sql } from 'drizzle-orm';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/client.js';
import type { DatabaseHandle } from '../../src/db/database.js';
import { createPoolWatchdog, type WatchdogVerdict } from '../../src/db/poolWatchdog.js';
import { postgresBackend, type TestDatabase } from '../support/databases.js';
import { startTcpProxy, type TcpProxy } from '../support/tcpProxy.js';

const pg = postgresBackend();
const PROBE_MS = 300;

/** Blocks the event loop for `ms`: what a flood of CPU-heavy verifies does to the process. */
function block(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

describe.skipIf(!pg)('the pool watchdog (PostgreSQL)', () => {
  let db: TestDatabase;
  let proxy: TcpProxy;
  let handle: DatabaseHandle;
  let recycled: number;

  beforeAll(async () => {
    db = await pg!.open();
    const u = new URL(db.url!);
    proxy = await startTcpProxy(u.hostname, Number(u.port || 5432));
  });
  afterAll(async () => {
    proxy?.cut();
    await proxy?.close();
    await db?.close();
  });
  afterEach(async () => {
    proxy.setMode('forward');
    proxy.cut();
    // a recycle ends the old pool at once (close would wait for its frozen connections)
    await handle?.recycle?.();
    await handle?.close().catch(() => {});
  });

  const open = async () => {
    handle = await openDatabase({
      url: proxy.urlFor(db.url!),
      dataDir: '',
      role: 'server',
      poolSize: 2,
    });
    // both connections open and ready
    await Promise.all(Array.from({ length: 4 }, () => handle.db.execute(sql`select 1`)));
    recycled = 0;
    const recycle = handle.recycle!;
    return { ...handle, recycle: () => (recycled++, recycle()) };
  };

  /** Three deadlines, then what the watchdog concluded (or that it recycled, as it did before). */
  const judged = (watched: DatabaseHandle, afterDeadlines: () => void = () => {}) =>
    new Promise<WatchdogVerdict>((resolve) => {
      const deadline = createPoolWatchdog(watched, {
        probeTimeoutMs: PROBE_MS,
        onVerdict: resolve,
        onRecycle: () => resolve('recycled'),
      });
      for (let i = 0; i < 3; i++) deadline();
      afterDeadlines();
    });

  it('deadlines missed because the event loop is saturated never recycle a healthy pool', async () => {
    const watched = await open();
    // as under a flood of android-key chains: the loop blocked 150 ms of every 200
    const saturate = setInterval(() => block(150), 200);
    try {
      const verdict = await Promise.race([
        judged(watched),
        new Promise((resolve) => setTimeout(resolve, 10_000, 'no verdict')),
      ]);
      expect(verdict).toBe('pool answers');
      expect(recycled).toBe(0);
    } finally {
      clearInterval(saturate);
    }
  });

  it('nor does a loop blocked for longer than the probe may take', async () => {
    const watched = await open();
    const verdict = await judged(watched, () => block(3 * PROBE_MS));
    expect(verdict).toBe('pool answers');
    expect(recycled).toBe(0);
  });

  it('a pool that hangs while the event loop is blocked is not judged: busy, kept', async () => {
    const watched = await open();
    proxy.setMode('stall');
    proxy.setMode('forward', { keepFrozen: true }); // the pool's connections hang for good
    const verdict = await judged(watched, () => block(3 * PROBE_MS));
    expect(verdict).toBe('busy');
    expect(recycled).toBe(0);
  });

  it('a pool that hangs while a fresh connection answers is replaced, and answers again', async () => {
    const watched = await open();
    proxy.setMode('stall');
    proxy.setMode('forward', { keepFrozen: true });
    expect(await judged(watched)).toBe('recycled');
    expect(recycled).toBe(1);
    await expect(watched.db.execute(sql`select 1`)).resolves.toBeDefined();
  });

  it('a pool whose commits the server holds for a synchronous standby is kept: a new one would leave them waiting', async () => {
    const watched = await open();
    // nothing waits on this server: the question itself is asked on a fresh connection
    expect(await watched.commitsAwaitingStandby!(PROBE_MS * 10)).toBe(0);
    proxy.setMode('stall');
    proxy.setMode('forward', { keepFrozen: true });
    // as on a promoted standby whose synchronous_standby_names names a standby not connected
    // (test/server/failover.test.ts meets the real one)
    const waiting = { ...watched, commitsAwaitingStandby: async () => 3 };
    expect(await judged(waiting)).toBe('awaiting standby');
    expect(recycled).toBe(0);
  });

  it('a database that is down is not recycled (the breaker handles it)', async () => {
    const watched = await open();
    proxy.setMode('stall');
    proxy.setMode('forward', { keepFrozen: true });
    proxy.setMode('refuse');
    // the pool's connections were closed: it fails at once (an answer), nothing to recycle
    expect(await judged(watched)).toBe('pool answers');
    expect(recycled).toBe(0);
  });
});
