import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import * as apiKeys from '../../src/core/apiKeys.js';
import { generateApiKey } from '../../src/core/apiKeys.js';
import { sql } from 'drizzle-orm';
import { rowsOf } from '../../src/db/database.js';
import { backends, type TestDatabase } from '../support/databases.js';
import { BASE, createTestService, issueKey } from '../support/service.js';

vi.mock('../../src/core/apiKeys.js', async (importOriginal) => {
  const actual = await importOriginal<typeof import('../../src/core/apiKeys.js')>();
  return { ...actual, verifyApiKeyHash: vi.fn(actual.verifyApiKeyHash) };
});
const argon = vi.mocked(apiKeys.verifyApiKeyHash);
const realArgon = (hash: string, presented: string) =>
  import('argon2').then((m) => m.default.verify(hash, presented));

afterEach(() => {
  argon.mockClear();
  argon.mockImplementation(realArgon);
});

/** POST init as a client at `address` (what @hono/node-server passes as the app's env) */
function initFrom(
  app: ReturnType<typeof createTestService>['app'],
  key: string,
  address = '192.0.2.10',
) {
  return app.request(
    `${BASE}/api/v1/attestation/init`,
    { method: 'POST', headers: { 'X-Api-Key': key } },
    { incoming: { socket: { remoteAddress: address } } },
  );
}

function wrongSecret(key: string): string {
  return key.slice(0, key.indexOf('_') + 17) + generateApiKey('attest').key.slice(-43);
}

describe.each(backends())('auth abuse on $name', (backend) => {
  let db: TestDatabase;
  let good: { id: string; key: string };

  beforeAll(async () => {
    db = await backend.open();
    good = await issueKey(db);
  });
  afterAll(async () => {
    await db?.close();
  });

  it('a lockout answers exactly as a wrong secret does (403, no body) and logs its own cause, without argon2', async () => {
    const service = createTestService(db, {
      auth: { now: () => 0, maxFailuresPerId: 2, maxFailuresPerAddress: 1000 },
    });
    const answers = [];
    for (let i = 0; i < 4; i++) {
      const res = await initFrom(service.app, wrongSecret(good.key), `192.0.2.${20 + i}`);
      answers.push({
        status: res.status,
        body: await res.text(),
        type: res.headers.get('content-type'),
      });
    }
    expect(new Set(answers.map((a) => JSON.stringify(a))).size).toBe(1);
    expect(answers[0]).toEqual({ status: 403, body: '', type: null });
    expect(service.logs.requests().map((l) => [l.auth, l.apiKeyId, l.status])).toEqual([
      ['mismatch', good.id, 403],
      ['mismatch', good.id, 403],
      ['locked_id', good.id, 403],
      ['locked_id', good.id, 403],
    ]);
    expect(argon).toHaveBeenCalledTimes(2);
  });

  it('the client address is the TCP peer: one address failing too often is refused for every id', async () => {
    const service = createTestService(db, { auth: { maxFailuresPerAddress: 2 } });
    for (let i = 0; i < 3; i++) await initFrom(service.app, wrongSecret(good.key), '198.51.100.77');
    expect(service.logs.requests().map((l) => l.auth)).toEqual([
      'mismatch',
      'mismatch',
      'locked_address',
    ]);
    expect((await initFrom(service.app, good.key, '198.51.100.78')).status).toBe(200);
  });

  it("a fresh instance lets the key's owner in at once however its id is flooded from many addresses: the database remembers its origins", async () => {
    const first = createTestService(db);
    expect((await initFrom(first.app, good.key, '2001:db8:5:6::10')).status).toBe(200);
    await vi.waitFor(async () => {
      const rows = await db.db.execute(
        sql`select prefix from api_key_origins where api_key_id = ${good.id}`,
      );
      expect(rowsOf<{ prefix: string }>(rows).map((r) => r.prefix)).toContain('2001:db8:5:6::/64');
    });
    // that success also stored the key's pre-check, which alone refuses wrong secrets
    // (test/server/authPrecheck.test.ts); without it (damaged, or a write that failed) the
    // origins still keep the owner in
    await vi.waitFor(async () => {
      const rows = await db.db.execute(sql`select precheck from api_keys where id = ${good.id}`);
      expect(rowsOf<{ precheck: string | null }>(rows)[0]?.precheck).not.toBeNull();
    });
    await db.db.execute(sql`update api_keys set precheck = null where id = ${good.id}`);
    // another instance (or this one restarted): nothing cached, a clock that never lets a probe through
    const fresh = createTestService(db, { auth: { now: () => 0 } });
    for (let i = 0; i < 40; i++)
      await initFrom(fresh.app, wrongSecret(good.key), `203.0.${i}.${i + 1}`);
    expect((await initFrom(fresh.app, wrongSecret(good.key), '203.0.99.1')).status).toBe(403);
    expect(fresh.logs.requests().at(-1)?.auth).toBe('locked_id');
    // the owner, from another address of its /64
    expect((await initFrom(fresh.app, good.key, '2001:db8:5:6::99')).status).toBe(200);
  });

  it('time queued for argon2 is not backend time: no 500, and the pool watchdog is not told', async () => {
    const onBackendTimeout = vi.fn();
    const service = createTestService(db, { requestDeadlineMs: 100, onBackendTimeout });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    argon.mockImplementation(async (hash, presented) => {
      await gate;
      return realArgon(hash, presented);
    });
    const pending = initFrom(service.app, good.key);
    // argon2 is held well past the 100 ms deadline, as a long hash queue holds it
    await vi.waitFor(() => expect(argon).toHaveBeenCalled());
    await new Promise((resolve) => setTimeout(resolve, 300));
    release();
    const res = await pending;
    expect(res.status).toBe(200);
    expect(onBackendTimeout).not.toHaveBeenCalled();
  });

  it('the row read still counts against the deadline (a hanging database is a 500 and tells the watchdog)', async () => {
    const onBackendTimeout = vi.fn();
    const service = createTestService(db, {
      requestDeadlineMs: 100,
      onBackendTimeout,
      auth: { lookup: { find: () => new Promise(() => {}), touch: async () => {} } },
    });
    const res = await initFrom(service.app, good.key);
    expect(res.status).toBe(500);
    expect(onBackendTimeout).toHaveBeenCalledTimes(1);
  });
});
