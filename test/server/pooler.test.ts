/**
 * Two attest instances behind PgBouncer in transaction mode (TEST_PGBOUNCER_URL, started by
 * .ci/run), as most managed PostgreSQL fleets run it: LISTEN, session advisory locks and named
 * prepared statements do not survive there. With ATTEST_CHANGE_FEED at its default (auto) each
 * instance finds that out, polls attest_changes instead, and runs unnamed statements; both
 * migrate one empty database at once; sessions, assertion counters and result tokens are
 * consumed exactly once across them; a revoked key and an allowlist change reach both. The
 * fallback re-read interval is ten minutes, so only the feed can explain a change arriving.
 * In session mode (the same PgBouncer, database attest_pooler_session) NOTIFY works and is kept.
 */
import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createDevCa,
  createSimulatedKey,
  mintAssertion,
  mintAttestation,
} from '../../src/core/dev/devCa.js';
import { encodeAppleToken } from '../../src/core/apple/appleToken.js';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import { createApiKeyRepository } from '../../src/db/apiKeys.js';
import { openDatabase } from '../../src/db/client.js';
import { rowsOf, type DatabaseHandle } from '../../src/db/database.js';
import { createDevCaRepository } from '../../src/db/devCa.js';
import { sql } from 'drizzle-orm';
import { adminClient, databaseUrl } from '../support/embeddedServer.js';
import { TEST_SECRETS } from '../support/secrets.js';
import { issueKey } from '../support/service.js';
import { nextChange, startInstance, verifyOn, type Instance } from '../support/twoInstances.js';

const TEN_MINUTES = 600_000;
const bouncer = process.env.TEST_PGBOUNCER_URL;
const direct = process.env.TEST_DATABASE_URL;
const ISSUER = 'https://attest.example.com';

const sha256 = (...parts: Uint8Array[]) => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest();
};

async function freshDatabase(name: string): Promise<void> {
  const admin = adminClient(direct!);
  await admin.unsafe(`drop database if exists ${name} with (force)`);
  await admin.unsafe(`create database ${name}`);
  await admin.end();
}

async function dropDatabase(name: string): Promise<void> {
  const admin = adminClient(direct!);
  await admin.unsafe(`drop database if exists ${name} with (force)`);
  await admin.end();
}

describe.skipIf(!bouncer || !direct)('two instances behind PgBouncer in transaction mode', () => {
  const name = `attest_pooler_${randomBytes(4).toString('hex')}`;
  let a: Instance;
  let b: Instance;
  let db: DatabaseHandle;
  let ca: Awaited<ReturnType<typeof createDevCa>>;
  let key: string;
  const appId = 'ABCDE12345.com.example.pooled';

  beforeAll(async () => {
    await freshDatabase(name);
    const url = databaseUrl(bouncer!, name);
    // both migrate the empty database at once, through the pooler: one waits for the other's lock
    const started = await Promise.all(
      [0, 1].map(() => startInstance(url, TEN_MINUTES, { issuer: ISSUER })),
    );
    [a, b] = [started[0]!, started[1]!];
    // the test's own writes go straight to PostgreSQL, as another instance's would
    db = await openDatabase({ url: databaseUrl(direct!, name), dataDir: '', role: 'server' });
    ({ key } = await issueKey(db, { name: 'pooled', mode: 'test', resultTokens: true }));
    ({ ca } = await createDevCaRepository(db.db, TEST_SECRETS).put(await createDevCa(new Date()), {
      replace: false,
    }));
    const heard = Promise.all([nextChange(a, 'apple_apps'), nextChange(b, 'apple_apps')]);
    await createAllowlistRepository(db.db, null).addApple(appId, undefined);
    await heard;
  }, 60_000);
  afterAll(async () => {
    await a?.server.close();
    await b?.server.close();
    await db?.close();
    await dropDatabase(name);
  });

  /** a new simulated device's registration, bound to `nonce` */
  async function registration(nonce: Buffer, forApp = appId) {
    const device = createSimulatedKey();
    const attestation = await mintAttestation(ca, device, {
      appId: forApp,
      environment: 'Production',
      clientDataHash: sha256(nonce),
      now: new Date(),
    });
    return { device, token: encodeAppleToken({ nonce, keyId: device.keyId, attestation }) };
  }

  const post = (i: Instance, path: string, body?: unknown) =>
    fetch(`${i.server.url}${path}`, {
      method: 'POST',
      headers: { 'X-Api-Key': key, 'Content-Type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });

  /**
   * The answers of concurrent requests: 200 with the body, or 500/503 with Retry-After (the database
   * gave no answer within the request's wait, as on a machine busier than its pooler can keep up
   * with: no verdict, and a retry is the client's). Anything else fails the test.
   */
  async function answersOf<T>(
    requests: Promise<Response>[],
  ): Promise<{ ok: T[]; unanswered: number }> {
    const ok: T[] = [];
    let unanswered = 0;
    for (const res of await Promise.all(requests)) {
      if ((res.status === 500 || res.status === 503) && res.headers.get('retry-after')) {
        unanswered++;
        continue;
      }
      expect(res.status).toBe(200);
      ok.push((await res.json()) as T);
    }
    return { ok, unanswered };
  }

  it('each instance found the pooler: it polls attest_changes, prepares no statement and pipelines none', () => {
    for (const i of [a, b]) {
      expect(i.server.database.connections).toMatchObject({
        feed: 'poll',
        transactionPooled: true,
        // PgBouncer refuses statement_timeout at connection start: the pool connects without it
        startupTimeout: false,
      });
      expect(i.server.database.connections!.why).toMatch(/did not reach a LISTEN/);
    }
  });

  it('the concurrent migrations applied every migration once', async () => {
    const rows = rowsOf<{ n: string | number; distinct_n: string | number }>(
      await db.db.execute(
        sql`select count(*) as n, count(distinct hash) as distinct_n from drizzle.__drizzle_migrations`,
      ),
    );
    expect(Number(rows[0]!.n)).toBe(Number(rows[0]!.distinct_n));
    // and the migration lock (0x61747465) was left on no server connection behind the pooler, as
    // a session-level lock would be
    const locks = rowsOf<{ n: string | number }>(
      await db.db.execute(
        sql`select count(*) as n from pg_locks l join pg_database d on d.oid = l.database
            where d.datname = current_database() and l.locktype = 'advisory' and l.objid = ${0x61747465}`,
      ),
    );
    expect(Number(locks[0]!.n)).toBe(0);
  });

  it('one session verified 40 times over both instances: exactly one is valid (never two; 3 rounds)', async () => {
    for (let round = 0; round < 3; round++) {
      const init = await post(a, '/api/v1/attestation/init');
      expect(init.status).toBe(200);
      const { serverNonce, sessionReference } = (await init.json()) as {
        serverNonce: string;
        sessionReference: string;
      };
      const { token } = await registration(Buffer.from(serverNonce, 'base64'));
      const attestationToken = Buffer.from(token).toString('base64');
      const { ok, unanswered } = await answersOf<{ isValid: boolean }>(
        Array.from({ length: 40 }, (_, i) =>
          post(i % 2 ? b : a, '/api/v1/attestation/verify', { attestationToken, sessionReference }),
        ),
      );
      const valid = ok.filter((x) => x.isValid).length;
      // a request left unanswered may have consumed the session without saying so
      expect(valid).toBe(unanswered === 0 ? 1 : valid);
      expect(valid).toBeLessThanOrEqual(1);
    }
  });

  it('20 assertions with one counter over both instances: exactly one is valid; a result token is consumed once', async () => {
    const nonce = randomBytes(32);
    const { device, token } = await registration(nonce);
    const registered = await post(a, '/api/v1/attestation/verify', {
      attestationToken: Buffer.from(token).toString('base64'),
      expectedNonce: nonce.toString('base64'),
    });
    const first = (await registered.json()) as { isValid: boolean; resultToken?: string };
    expect(first.isValid).toBe(true);
    const answers = await answersOf<{ isValid: boolean }>(
      Array.from({ length: 20 }, (_, i) => {
        const n = randomBytes(32);
        const assertion = mintAssertion(device, { appId, counter: 1, clientDataHash: sha256(n) });
        return post(i % 2 ? b : a, '/api/v1/attestation/verify', {
          attestationToken: Buffer.from(
            encodeAppleToken({ nonce: n, keyId: device.keyId, assertion }),
          ).toString('base64'),
          expectedNonce: n.toString('base64'),
        });
      }),
    );
    const valid = answers.ok.filter((x) => x.isValid).length;
    expect(valid).toBe(answers.unanswered === 0 ? 1 : valid);
    expect(valid).toBeLessThanOrEqual(1);

    // the registration's result token, consumed 30 times at once over both
    const resultToken = first.resultToken;
    expect(resultToken).toEqual(expect.any(String));
    const consumed = await answersOf<{ valid: boolean; alreadyConsumed: boolean }>(
      Array.from({ length: 30 }, (_, i) =>
        post(i % 2 ? b : a, '/api/v1/results/consume', { resultToken }),
      ),
    );
    expect(consumed.ok.every((x) => x.valid)).toBe(true);
    const firsts = consumed.ok.filter((x) => !x.alreadyConsumed).length;
    expect(firsts).toBe(consumed.unanswered === 0 ? 1 : firsts);
    expect(firsts).toBeLessThanOrEqual(1);
  });

  it('an app allowlisted and removed directly on PostgreSQL is seen by both instances', async () => {
    const other = 'ABCDE12345.com.example.pooledlater';
    const body = async () => {
      const nonce = randomBytes(32);
      const { token } = await registration(nonce, other);
      return JSON.stringify({
        attestationToken: Buffer.from(token).toString('base64'),
        expectedNonce: nonce.toString('base64'),
      });
    };
    expect(await verifyOn(b, key, await body())).toBe(false);
    let heard = Promise.all([nextChange(a, 'apple_apps'), nextChange(b, 'apple_apps')]);
    await createAllowlistRepository(db.db, null).addApple(other, undefined);
    await heard;
    expect(await verifyOn(a, key, await body())).toBe(true);
    expect(await verifyOn(b, key, await body())).toBe(true);
    heard = Promise.all([nextChange(a, 'apple_apps'), nextChange(b, 'apple_apps')]);
    await createAllowlistRepository(db.db, null).removeApple(other);
    await heard;
    expect(await verifyOn(a, key, await body())).toBe(false);
    expect(await verifyOn(b, key, await body())).toBe(false);
  });

  it('a key revoked directly on PostgreSQL is refused by both instances', async () => {
    const { key: doomed } = await issueKey(db, { name: 'doomed', mode: 'test' });
    const init = (i: Instance) =>
      fetch(`${i.server.url}/api/v1/attestation/init`, {
        method: 'POST',
        headers: { 'X-Api-Key': doomed },
      });
    expect((await init(a)).status).toBe(200);
    expect((await init(b)).status).toBe(200);
    const heard = Promise.all([nextChange(a, 'api_keys'), nextChange(b, 'api_keys')]);
    const id = doomed.slice('attest_'.length, 'attest_'.length + 16);
    expect(await createApiKeyRepository(db.db).revoke(id)).toBe(true);
    await heard;
    expect((await init(a)).status).toBe(403);
    expect((await init(b)).status).toBe(403);
  });
});

describe.skipIf(!bouncer || !direct)('an instance behind PgBouncer in session mode', () => {
  // .ci/run's PgBouncer serves this one database name in session mode
  const name = 'attest_pooler_session';
  let a: Instance | undefined;
  beforeAll(async () => {
    await freshDatabase(name);
    a = await startInstance(databaseUrl(bouncer!, name), TEN_MINUTES);
  }, 60_000);
  afterAll(async () => {
    await a?.server.close();
    await dropDatabase(name);
  });

  it('keeps NOTIFY and prepared statements; only statement_timeout is left to the role', () => {
    expect(a!.server.database.connections).toMatchObject({
      feed: 'notify',
      transactionPooled: false,
      startupTimeout: false,
    });
  });
});
