/**
 * A key's first read lands on a connection whose answers stopped (no reset: a lost peer). Before,
 * concurrent reads of that key id shared the load, which never settled: every later request with
 * the key answered 500 after 5 s for good. Now the load times out (250 ms), is shared no longer,
 * the pool whose statements time out is replaced, and the key answers 200 again within seconds.
 */
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/client.js';
import type { DatabaseHandle } from '../../src/db/database.js';
import { createPoolWatchdog, type WatchdogVerdict } from '../../src/db/poolWatchdog.js';
import { DATABASE_WAIT_MS } from '../../src/config.js';
import { postgresBackend, type TestDatabase } from '../support/databases.js';
import { BASE, createTestService, issueKey } from '../support/service.js';
import { startTcpProxy, type TcpProxy } from '../support/tcpProxy.js';

const pg = postgresBackend();

describe.skipIf(!pg)('a key whose first read lands on a hung connection (PostgreSQL)', () => {
  let db: TestDatabase;
  let proxy: TcpProxy;
  let handle: DatabaseHandle;
  let key: { id: string; key: string };
  beforeAll(async () => {
    db = await pg!.open();
    key = await issueKey(db);
    const u = new URL(db.url!);
    proxy = await startTcpProxy(u.hostname, Number(u.port || 5432));
    handle = await openDatabase({
      url: proxy.urlFor(db.url!),
      dataDir: '',
      role: 'server',
      poolSize: 1,
    });
  });
  afterAll(async () => {
    proxy?.cut();
    await handle?.close();
    await proxy?.close();
    await db?.close();
  });

  it('fails fast with Retry-After, then the key answers again (no wedge)', async () => {
    const verdicts: WatchdogVerdict[] = [];
    const service = createTestService(handle, {
      databaseWaitMs: DATABASE_WAIT_MS,
      onBackendTimeout: createPoolWatchdog(handle, {
        probeTimeoutMs: 500,
        onVerdict: (v) => verdicts.push(v),
      }),
    });
    await handle.db.execute(sql`select 1`); // the pool's one connection is open
    // that connection stops answering for good; new connections work
    proxy.setMode('stall');
    proxy.setMode('forward', { keepFrozen: true });
    const request = async () => {
      const started = performance.now();
      const res = await service.app.request(`${BASE}/api/v1/attestation/init`, {
        method: 'POST',
        headers: { 'X-Api-Key': key.key },
      });
      return {
        status: res.status,
        retryAfter: res.headers.get('retry-after'),
        ms: performance.now() - started,
      };
    };
    // concurrent first reads share the hung load: each is released by the wait deadline
    const first = await Promise.all(Array.from({ length: 3 }, request));
    for (const r of first) {
      expect(r.status).toBe(503);
      expect(r.retryAfter).toBe('1');
      expect(r.ms).toBeLessThan(2000);
    }
    let last = first[0]!;
    for (let i = 0; i < 40 && last.status !== 200; i++) {
      last = await request();
      if (last.status !== 200) {
        expect(last.ms).toBeLessThan(2000);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    expect(last.status).toBe(200);
    expect(verdicts).toContain('recycled');
  }, 30_000);
});
