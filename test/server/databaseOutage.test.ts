import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/client.js';
import type { DatabaseHandle } from '../../src/db/database.js';
import { createDatabaseBreaker, type DatabaseBreaker } from '../../src/db/databaseBreaker.js';
import { STATUS_INTERNAL_ERROR } from '../../src/server/errorBody.js';
import { backends, postgresBackend, useDatabase, type TestDatabase } from '../support/databases.js';
import { BASE, createTestService, init, issueKey } from '../support/service.js';
import { startTcpProxy, type TcpProxy } from '../support/tcpProxy.js';

/** status, Retry-After and how long the answer took */
async function timed(request: () => Response | Promise<Response>) {
  const started = performance.now();
  const res = await request();
  const body = (await res.json().catch(() => null)) as Record<string, unknown> | null;
  return {
    status: res.status,
    retryAfter: res.headers.get('retry-after'),
    body,
    ms: performance.now() - started,
  };
}

/** Resolves with the breaker's next change: true when it opened, false when it closed. */
function breakerEvents() {
  const waiting: ((open: boolean) => void)[] = [];
  return {
    onChange: (open: boolean) => waiting.shift()?.(open),
    next: () => new Promise<boolean>((resolve) => waiting.push(resolve)),
  };
}

const initRequest = (
  service: { app: { request: (url: string, init?: RequestInit) => Response | Promise<Response> } },
  key: string,
) =>
  timed(() =>
    service.app.request(`${BASE}/api/v1/attestation/init`, {
      method: 'POST',
      headers: { 'X-Api-Key': key },
    }),
  );

describe.each(backends())('an open breaker ($name)', (backend) => {
  const db = useDatabase(backend);

  it('answers 503 268505088 with Retry-After at once, queues no statement, readyz 503; closed again, serves', async () => {
    const key = await issueKey(db);
    let up = false;
    const events = breakerEvents();
    const breaker = createDatabaseBreaker({
      probe: async () => {
        if (!up) throw Object.assign(new Error('refused'), { code: 'ECONNREFUSED' });
      },
      retryMs: 10,
      onChange: events.onChange,
    });
    let statements = 0;
    const counted = createTestService(db).sessions;
    const service = createTestService(db, {
      breaker,
      sessions: {
        create: (input) => (statements++, counted.create(input)),
        consume: (reference, keyId) => (statements++, counted.consume(reference, keyId)),
      },
    });
    try {
      // the key is read once while the database answers (its row is cached)
      up = true;
      expect((await init(service.app, key.key)).res.status).toBe(200);
      statements = 0;
      up = false;
      const opened = events.next();
      breaker.suspect();
      expect(await opened).toBe(true);
      for (let i = 0; i < 5; i++) {
        const r = await initRequest(service, key.key);
        expect(r.status).toBe(503);
        expect(r.body).toEqual({
          statusCode: STATUS_INTERNAL_ERROR,
          errorMessage: 'Database unavailable, retry shortly',
        });
        expect(r.retryAfter).toBe('1');
      }
      expect(statements).toBe(0);
      expect((await service.app.request(`${BASE}/readyz`)).status).toBe(503);
      // no key needs no database: still 401
      const noKey = await service.app.request(`${BASE}/api/v1/attestation/init`, {
        method: 'POST',
      });
      expect(noKey.status).toBe(401);
      // nor does a malformed request
      const malformed = await service.app.request(`${BASE}/api/v1/attestation/verify`, {
        method: 'POST',
        headers: { 'X-Api-Key': key.key, 'Content-Type': 'application/json' },
        body: '{',
      });
      expect(malformed.status).toBe(400);
      const closed = events.next();
      up = true;
      expect(await closed).toBe(false);
      expect((await init(service.app, key.key)).res.status).toBe(200);
      expect((await service.app.request(`${BASE}/readyz`)).status).toBe(200);
    } finally {
      breaker.stop();
    }
  });
});

const pg = postgresBackend();

describe.skipIf(!pg)('a database outage through a TCP proxy (PostgreSQL)', () => {
  let db: TestDatabase;
  let key: { id: string; key: string };
  let proxy: TcpProxy;
  let handle: DatabaseHandle;
  let breaker: DatabaseBreaker;
  let events: ReturnType<typeof breakerEvents>;
  let service: ReturnType<typeof createTestService>;

  beforeAll(async () => {
    db = await pg!.open();
    key = await issueKey(db);
    const u = new URL(db.url!);
    proxy = await startTcpProxy(u.hostname, Number(u.port || 5432));
    handle = await openDatabase({
      url: proxy.urlFor(db.url!),
      dataDir: '',
      role: 'server',
      poolSize: 3,
    });
    events = breakerEvents();
    breaker = createDatabaseBreaker({
      probe: (ms) => handle.probe!(ms),
      onChange: events.onChange,
    });
    // the server's own deadline: 5 s
    service = createTestService(handle, { breaker });
    // the first request pays argon2 for the key and opens the pool's connections
    while ((await init(service.app, key.key)).res.status !== 200);
  });
  afterAll(async () => {
    breaker?.stop();
    proxy?.setMode('forward');
    proxy?.cut();
    await handle?.recycle?.();
    await handle?.close();
    await proxy?.close();
    await db?.close();
  });

  /** Brings the database back and returns how long until init answers 200 again. */
  const recover = async () => {
    const closed = events.next();
    proxy.setMode('forward');
    const back = performance.now();
    expect(await closed).toBe(false);
    let r = await initRequest(service, key.key);
    // a connection the pool opened during the outage may still fail once
    for (let i = 0; r.status !== 200 && i < 20; i++) r = await initRequest(service, key.key);
    expect(r.status).toBe(200);
    return performance.now() - back;
  };

  it('refused: requests and readyz answer at once while it is down; serving again soon after it returns', async () => {
    const opened = events.next();
    proxy.setMode('refuse');
    // the first request meets the refusal itself, and has the breaker probe
    const first = await initRequest(service, key.key);
    expect(first.status).toBe(503);
    expect(await opened).toBe(true);
    const during = await Promise.all(
      Array.from({ length: 20 }, () => initRequest(service, key.key)),
    );
    for (const r of during) {
      expect(r.status).toBe(503);
      expect(r.body).toMatchObject({ statusCode: STATUS_INTERNAL_ERROR });
      expect(r.retryAfter).toBe('1');
      expect(r.ms).toBeLessThan(1500);
    }
    const ready = await timed(() => service.app.request(`${BASE}/readyz`));
    expect(ready.status).toBe(503);
    expect(ready.ms).toBeLessThan(1500);
    expect(await recover()).toBeLessThan(3000);
  }, 30_000);

  it('stalled (a partition): requests in flight are released when the probe fails, later ones answer at once', async () => {
    const opened = events.next();
    proxy.setMode('stall');
    // statements hang: after 1 s a slow call has the breaker probe, and its probe hangs too
    const inFlight = initRequest(service, key.key);
    const readyInFlight = timed(() => service.app.request(`${BASE}/readyz`));
    expect(await opened).toBe(true);
    const r = await inFlight;
    expect(r.status).toBe(503);
    expect(r.ms).toBeLessThan(4000); // the deadline is 5 s
    expect((await readyInFlight).status).toBe(503);
    const during = await Promise.all(
      Array.from({ length: 20 }, () => initRequest(service, key.key)),
    );
    for (const d of during) {
      expect(d.status).toBe(503);
      expect(d.ms).toBeLessThan(1500);
    }
    const ready = await timed(() => service.app.request(`${BASE}/readyz`));
    expect(ready.status).toBe(503);
    expect(ready.ms).toBeLessThan(1500);
    expect(await recover()).toBeLessThan(3000);
  }, 30_000);
});
