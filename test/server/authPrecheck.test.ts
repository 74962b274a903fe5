/**
 * The pre-check: wrong secrets are refused for the cost of one HMAC, before argon2 and before any
 * failure budget, so a key's owner calling from an address it never used gets in however many
 * addresses flood its id; keys made before pre-checks get theirs from their next verification;
 * a damaged stored hash is a refusal (and a log line), never a 500.
 */
import { sql } from 'drizzle-orm';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import * as apiKeys from '../../src/core/apiKeys.js';
import { generateApiKey } from '../../src/core/apiKeys.js';
import { createApiKeyRepository } from '../../src/db/apiKeys.js';
import { rowsOf } from '../../src/db/database.js';
import { backends, type TestDatabase } from '../support/databases.js';
import { BASE, createTestService, issueKey } from '../support/service.js';

vi.mock('../../src/core/apiKeys.js', async (importOriginal) => {
  const actual = await importOriginal<typeof import('../../src/core/apiKeys.js')>();
  return { ...actual, verifyApiKeyHash: vi.fn(actual.verifyApiKeyHash) };
});
const argon = vi.mocked(apiKeys.verifyApiKeyHash);

afterEach(() => argon.mockClear());

/** POST init as a client at `address` (what @hono/node-server passes as the app's env: the TCP peer) */
function initFrom(app: ReturnType<typeof createTestService>['app'], key: string, address: string) {
  return app.request(
    `${BASE}/api/v1/attestation/init`,
    { method: 'POST', headers: { 'X-Api-Key': key } },
    { incoming: { socket: { remoteAddress: address } } },
  );
}

const wrongSecret = (key: string) =>
  key.slice(0, key.indexOf('_') + 17) + generateApiKey('attest').key.slice(-43);
/** the attacker's 1000 rotating addresses */
const attacker = (i: number) => `198.18.${Math.floor((i % 1000) / 250)}.${(i % 250) + 1}`;

describe.each(backends())('API key pre-check on $name', (backend) => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await backend.open();
  });
  afterAll(async () => {
    await db?.close();
  });

  /**
   * 100 wrong secrets a second for the key's id from 1000 rotating addresses, on a clock that
   * moves 10 ms per request; from `firstTry` on, the owner tries every 100 ms from an address
   * it never used. Returns when the owner got in (ms after its first try) and the tally.
   */
  async function flood(key: string, seconds: number, firstTryMs: number) {
    let clock = 1_000_000;
    const service = createTestService(db, { auth: { now: () => clock } });
    const wrong: Record<number, number> = {};
    let inAfter: number | undefined;
    let ownerTries = 0;
    for (let i = 0; i < seconds * 100; i++) {
      clock += 10;
      const res = await initFrom(service.app, wrongSecret(key), attacker(i));
      wrong[res.status] = (wrong[res.status] ?? 0) + 1;
      const elapsed = i * 10;
      if (inAfter === undefined && elapsed >= firstTryMs && elapsed % 100 === 0) {
        ownerTries++;
        const owner = await initFrom(service.app, key, '203.0.113.200');
        if (owner.status === 200) inAfter = elapsed - firstTryMs;
      }
    }
    return { inAfter, ownerTries, wrong, service };
  }

  it('a brand-new key, flooded with 100 wrong secrets/s from 1000 addresses, lets its owner in from a new address at the first try; no wrong secret reaches argon2', async () => {
    const key = await issueKey(db, { precheck: true });
    const { inAfter, ownerTries, wrong, service } = await flood(key.key, 5, 3000);
    expect(inAfter).toBe(0);
    expect(ownerTries).toBe(1);
    expect(wrong).toEqual({ 403: 500 });
    expect(argon).toHaveBeenCalledTimes(1); // the owner's secret only
    const causes = new Set(
      service.logs
        .requests()
        .filter((l) => l.status === 403)
        .map((l) => l.auth),
    );
    expect([...causes]).toEqual(['mismatch']);
  });

  it('a key made before pre-checks gets one at its next verification; from then on a fresh instance refuses wrong secrets without argon2 and lets the owner in from a new address', async () => {
    const key = await issueKey(db); // no pre-check, as a key created by an older version
    const repository = createApiKeyRepository(db.db);
    expect((await repository.find(key.id))?.precheck).toBeNull();
    const first = createTestService(db);
    expect((await initFrom(first.app, key.key, '192.0.2.50')).status).toBe(200);
    await vi.waitFor(async () =>
      expect(apiKeys.isApiKeyCheck((await repository.find(key.id))?.precheck ?? '')).toBe(true),
    );
    argon.mockClear();
    const { inAfter, wrong } = await flood(key.key, 4, 2000);
    expect(inAfter).toBe(0);
    expect(wrong).toEqual({ 403: 400 });
    expect(argon).toHaveBeenCalledTimes(1);
  });

  it('a stored hash that is not an argon2id hash (`$argon2id$x`) is a 403 and one log line, never a 500, and costs no argon2', async () => {
    const { id, key } = generateApiKey('attest');
    await createApiKeyRepository(db.db).insert({
      id,
      name: 'damaged',
      hash: '$argon2id$x',
      expiresInSeconds: null,
    });
    const told: [string, string][] = [];
    const service = createTestService(db, {
      auth: { onStoredKeyProblem: (keyId, problem) => told.push([keyId, problem]) },
    });
    for (let i = 0; i < 3; i++) {
      const res = await initFrom(service.app, i === 1 ? key : wrongSecret(key), '192.0.2.60');
      expect(res.status).toBe(403);
    }
    expect(service.logs.requests().map((l) => [l.status, l.auth, l.apiKeyId])).toEqual([
      [403, 'bad_hash', id],
      [403, 'bad_hash', id],
      [403, 'bad_hash', id],
    ]);
    expect(told).toEqual([[id, 'the stored hash is not an argon2id hash as attest makes it']]);
    expect(argon).not.toHaveBeenCalled();
  });

  it('a hash argon2 cannot read although it looks right is a 403, not a 500', async () => {
    const { id, key } = generateApiKey('attest');
    await db.db.execute(
      sql`insert into api_keys (id, name, hash) values (${id}, 'broken', ${await apiKeys.hashApiKey(key)})`,
    );
    // what argon2 answers a hash it cannot read
    argon.mockImplementationOnce(() => Promise.reject(new Error('pchstr must be valid')));
    const told: string[] = [];
    const service = createTestService(db, {
      auth: { onStoredKeyProblem: (_id, problem) => told.push(problem) },
    });
    const res = await initFrom(service.app, key, '192.0.2.61');
    expect(res.status).toBe(403);
    expect(service.logs.last().auth).toBe('bad_hash');
    expect(told).toEqual(['argon2 cannot check the stored hash (pchstr must be valid)']);
    const rows = rowsOf<{ precheck: string | null }>(
      await db.db.execute(sql`select precheck from api_keys where id = ${id}`),
    );
    expect(rows[0]?.precheck).toBeNull();
  });
});
