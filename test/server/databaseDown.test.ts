import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/client.js';
import type { DatabaseHandle } from '../../src/db/database.js';
import { createPoolWatchdog } from '../../src/db/poolWatchdog.js';
import { DATABASE_WAIT_MS } from '../../src/config.js';
import { STATUS_INTERNAL_ERROR, STATUS_INVALID_REQUEST } from '../../src/server/errorBody.js';
import { postgresBackend, type TestDatabase } from '../support/databases.js';
import { BASE, createTestService, init, issueKey, verify } from '../support/service.js';
import { closedPort, startTcpProxy, type TcpProxy } from '../support/tcpProxy.js';
import { b64, token } from '../support/tokens.js';

const DEADLINE = 1000;
const pg = postgresBackend();

/** status, body and how long the answer took */
async function timed(request: () => Response | Promise<Response>) {
  const started = performance.now();
  const res = await request();
  return {
    status: res.status,
    retryAfter: res.headers.get('retry-after'),
    body: (await res.json().catch(() => null)) as Record<string, unknown> | null,
    ms: performance.now() - started,
  };
}

describe.skipIf(!pg)('database down or hanging (PostgreSQL)', () => {
  let db: TestDatabase;
  let key: { id: string; key: string };

  beforeAll(async () => {
    db = await pg!.open();
    key = await issueKey(db);
  });
  afterAll(async () => {
    await db?.close();
  });

  it('a closed port: 503 268505088 fast, validation errors still 400, readyz 503', async () => {
    const url = new URL(db.url!);
    url.port = String(await closedPort());
    const handle = await openDatabase({
      url: url.toString(),
      dataDir: '',
      role: 'server',
      poolSize: 2,
    });
    try {
      const service = createTestService(handle, { requestDeadlineMs: DEADLINE });
      const i = await timed(() =>
        service.app.request(`${BASE}/api/v1/attestation/init`, {
          method: 'POST',
          headers: { 'X-Api-Key': key.key },
        }),
      );
      expect(i.status).toBe(503); // the key lookup itself fails
      expect(i.body).toEqual({
        statusCode: STATUS_INTERNAL_ERROR,
        errorMessage: expect.any(String),
      });
      expect(i.ms).toBeLessThan(DEADLINE + 1500);
      expect(service.logs.last()).toMatchObject({ status: 503, level: 50 });
      // no key at all needs no database: still 401
      const noKey = await verify(service.app, undefined, { attestationToken: '' });
      expect(noKey.status).toBe(401);
      const ready = await service.app.request(`${BASE}/readyz`);
      expect(ready.status).toBe(503);
    } finally {
      await handle.close();
    }
  });

  describe('through a proxy that stalls, cuts, and comes back', () => {
    let proxy: TcpProxy;
    let handle: DatabaseHandle;
    let service: ReturnType<typeof createTestService>;

    beforeAll(async () => {
      const u = new URL(db.url!);
      proxy = await startTcpProxy(u.hostname, Number(u.port || 5432));
      handle = await openDatabase({
        url: proxy.urlFor(db.url!),
        dataDir: '',
        role: 'server',
        poolSize: 3,
      });
      service = createTestService(handle, {
        requestDeadlineMs: DEADLINE,
        onBackendTimeout: createPoolWatchdog(handle, { probeTimeoutMs: 1000 }),
        // the server's own: a statement unanswered for 250 ms releases its request
        databaseWaitMs: DATABASE_WAIT_MS,
      });
      // the first request pays argon2 for the key and opens the pool's connections: on a loaded
      // machine that alone can exceed the 1 s deadline, which these tests aim at stalls, not at that
      while ((await init(service.app, key.key)).res.status !== 200);
      service.logs.clear();
    });
    afterAll(async () => {
      proxy?.cut();
      await handle?.close();
      await proxy?.close();
    });

    const session = async () => {
      const { res, body } = await init(service.app, key.key);
      expect(res.status).toBe(200);
      return body;
    };
    const goodVerify = (s: { sessionReference: string; serverNonce: string }) =>
      verify(service.app, key.key, {
        attestationToken: b64(token(new Uint8Array(Buffer.from(s.serverNonce, 'base64')))),
        sessionReference: s.sessionReference,
      });

    it('works while forwarding', async () => {
      const s = await session();
      expect(await (await goodVerify(s)).json()).toMatchObject({ isValid: true });
    });

    it('stalled (mute: packets held, nothing refused): init and verify answer 503 268505088 with Retry-After within 250 ms of their database wait, never isValid true; then recover', async () => {
      const prepared = await session(); // made while the database answered
      proxy.setMode('stall');
      // more stalled requests than the pool has connections
      const stalled = await Promise.all([
        timed(() =>
          service.app.request(`${BASE}/api/v1/attestation/init`, {
            method: 'POST',
            headers: { 'X-Api-Key': key.key },
          }),
        ),
        timed(() => goodVerify(prepared)),
        ...Array.from({ length: 5 }, () =>
          timed(() =>
            service.app.request(`${BASE}/api/v1/attestation/init`, {
              method: 'POST',
              headers: { 'X-Api-Key': key.key },
            }),
          ),
        ),
      ]);
      for (const r of stalled) {
        expect(r.status).toBe(503);
        expect(r.body).toMatchObject({ statusCode: STATUS_INTERNAL_ERROR });
        expect(r.body?.isValid).toBeUndefined();
        expect(r.retryAfter).toBe('1');
        // the request's one database wait, plus what a loaded machine adds (lag-aware windows)
        expect(r.ms).toBeGreaterThanOrEqual(DATABASE_WAIT_MS - 50);
        expect(r.ms).toBeLessThan(DEADLINE);
      }
      expect(
        service.logs
          .requests()
          .filter((l) => l.status === 503)
          .every((l) => (l.err as { type?: string })?.type === 'DatabaseTimeoutError'),
      ).toBe(true);
      // validation never waits for the database and is never 268505088
      const bad = await timed(() =>
        verify(service.app, key.key, { attestationToken: '!', sessionReference: 'x' }),
      );
      expect(bad.status).toBe(400);
      expect(bad.body).toMatchObject({ statusCode: STATUS_INVALID_REQUEST });
      expect(bad.ms).toBeLessThan(1500);
      // readyz answers (503) within the deadline too
      const ready = await timed(() => service.app.request(`${BASE}/readyz`));
      expect(ready.status).toBe(503);
      // and /metrics still answers (the session gauge is skipped) while the database hangs
      const metricsStarted = performance.now();
      const metrics = await service.app.request(`${BASE}/metrics`);
      expect(metrics.status).toBe(200);
      expect(await metrics.text()).toMatch(
        /attest_http_requests_total\{route="\/api\/v1\/attestation\/init",method="POST",status="503"\}/,
      );
      expect(performance.now() - metricsStarted).toBeLessThan(DEADLINE + 2000);

      proxy.setMode('forward');
      // recovery without a restart: the held queries finish, new ones go through
      await expect
        .poll(
          async () =>
            (
              await service.app.request(`${BASE}/api/v1/attestation/init`, {
                method: 'POST',
                headers: { 'X-Api-Key': key.key },
              })
            ).status,
          { timeout: 8000, interval: 200 },
        )
        .toBe(200);
      const s = await session();
      expect(await (await goodVerify(s)).json()).toMatchObject({ isValid: true });
      // the verify that timed out during the stall answered no verdict: its held consume either
      // reached the database late (the session is used: the retry is refused) or never did (the
      // pool dropped that connection: the retry consumes it); either way once, never twice
      const retries = [
        (await (await goodVerify(prepared)).json()) as { isValid: boolean },
        (await (await goodVerify(prepared)).json()) as { isValid: boolean },
      ];
      expect(retries[1]).toMatchObject({ isValid: false });
    }, 20_000);

    // when every pooled connection loses its peer mid-query without a reset (silent partition,
    // dropped NAT/firewall flow), postgres-js waits for an answer forever (statement_timeout acts
    // only on the server): the pool watchdog sees the deadlines, probes, and replaces the pool
    it('connections frozen for good (no reset) do not keep the service down', async () => {
      // fill the pool; the stall before may have left the watchdog replacing it (a late
      // recycle ends the old pool's connections under whatever runs on them): until it is done
      await expect
        .poll(
          () =>
            Promise.all(Array.from({ length: 6 }, () => service.sessions.counts())).then(
              () => true,
              () => false,
            ),
          { timeout: 10_000, interval: 200 },
        )
        .toBe(true);
      proxy.setMode('stall');
      await Promise.all(
        Array.from({ length: 5 }, () =>
          service.app.request(`${BASE}/api/v1/attestation/init`, {
            method: 'POST',
            headers: { 'X-Api-Key': key.key },
          }),
        ),
      );
      proxy.setMode('forward', { keepFrozen: true });
      await expect
        .poll(
          async () =>
            (
              await service.app.request(`${BASE}/api/v1/attestation/init`, {
                method: 'POST',
                headers: { 'X-Api-Key': key.key },
              })
            ).status,
          { timeout: 15_000, interval: 500 },
        )
        .toBe(200);
    }, 30_000);

    it('connections cut mid-query: 503 quickly, then recovery', async () => {
      const prepared = await session();
      proxy.setMode('stall');
      const pending = timed(() => goodVerify(prepared));
      await new Promise((r) => setTimeout(r, 200));
      proxy.cut();
      proxy.setMode('forward');
      const r = await pending;
      expect(r.status).toBe(503);
      expect(r.body).toMatchObject({ statusCode: STATUS_INTERNAL_ERROR });
      expect(r.retryAfter).toBe('1');
      expect(r.ms).toBeLessThan(DEADLINE + 1500);
      await expect
        .poll(
          async () =>
            (
              await service.app.request(`${BASE}/api/v1/attestation/init`, {
                method: 'POST',
                headers: { 'X-Api-Key': key.key },
              })
            ).status,
          { timeout: 8000, interval: 200 },
        )
        .toBe(200);
      const s = await session();
      expect(await (await goodVerify(s)).json()).toMatchObject({ isValid: true });
    }, 20_000);
  });
});
