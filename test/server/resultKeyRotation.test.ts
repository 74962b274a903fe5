/**
 * Rotation of result signing keys across two app instances on one database. Time is simulated:
 * each step moves the instances' clock and every stored key's dates back by the same amount (the
 * database's clock is the one that decides when a key signs and when it is retired).
 */
import { randomBytes } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, type JSONWebKeySet } from 'jose';
import { beforeEach, describe, expect, it } from 'vitest';
import { newResultSigningKey } from '../../src/core/resultToken.js';
import {
  RETIRED_KEY_GRACE_SECONDS,
  ROTATION_DELAY_SECONDS,
} from '../../src/core/resultKeyTiming.js';
import type { AuditEvent } from '../../src/db/audit.js';
import { rowsOf } from '../../src/db/database.js';
import { createResultKeyRepository } from '../../src/db/resultKeys.js';
import { createResultTokenSigner } from '../../src/server/resultTokenSigner.js';
import { backends, useDatabase } from '../support/databases.js';
import { TEST_SECRETS } from '../support/secrets.js';
import { BASE, createTestService, issueKey, verify } from '../support/service.js';
import { b64, token } from '../support/tokens.js';

const ISSUER = 'https://attest.example.com';
const TTL = 300;
const REFRESH_MS = 5000;

describe.each(backends())('result key rotation on $name', (backend) => {
  const db = useDatabase(backend);
  let clock: number;
  let key: { id: string; key: string };
  const instance = () => {
    const signer = createResultTokenSigner({
      keys: createResultKeyRepository(db.db, TEST_SECRETS),
      issuer: ISSUER,
      ttlSeconds: TTL,
      refreshMs: REFRESH_MS,
      now: () => clock,
    });
    return { signer, ...createTestService(db, { resultTokens: signer }) };
  };
  let a: ReturnType<typeof instance>;
  let b: ReturnType<typeof instance>;

  beforeEach(async () => {
    clock = Date.now();
    key = await issueKey(db, { name: 'rp', resultTokens: true });
    a = instance();
    b = instance();
  });

  /** `ms` pass for the instances and for the database's stored dates */
  async function elapse(ms: number) {
    clock += ms;
    await db.db.execute(
      sql`update result_signing_keys set created_at = created_at - make_interval(secs => ${ms / 1000}),
          signing_from = signing_from - make_interval(secs => ${ms / 1000})`,
    );
  }
  async function resultToken(app = a.app): Promise<string> {
    const nonce = randomBytes(32);
    const res = await verify(app, key.key, {
      attestationToken: b64(token(nonce)),
      expectedNonce: nonce.toString('base64'),
    });
    expect(res.status).toBe(200);
    return ((await res.json()) as { resultToken: string }).resultToken;
  }
  async function jwks(app = b.app): Promise<JSONWebKeySet> {
    return (await (await app.request(`${BASE}/.well-known/jwks.json`)).json()) as JSONWebKeySet;
  }
  const kidOf = (jwt: string) => decodeProtectedHeader(jwt).kid!;
  const verifies = (jwt: string, set: JSONWebKeySet) =>
    jwtVerify(jwt, createLocalJWKSet(set), {
      issuer: ISSUER,
      audience: key.id,
      currentDate: new Date(clock),
    }).then(
      () => true,
      () => false,
    );

  it('two instances starting together agree: whichever first key wins, a token of one verifies against the other', async () => {
    await Promise.all([a.signer.ensureKey(), b.signer.ensureKey()]);
    const jwt = await resultToken(a.app);
    expect(await verifies(jwt, await jwks(b.app))).toBe(true);
    const other = await resultToken(b.app);
    expect(await verifies(other, await jwks(a.app))).toBe(true);
  });

  it('a new key is in every JWKS before any instance signs with it; tokens signed before, during and after verify against both instances', async () => {
    await a.signer.ensureKey();
    const first = await resultToken(a.app);
    const oldKid = kidOf(first);
    // B reads the keys later than A: the rotation falls where A's read is about to expire and
    // B's is fresh, so A sees the new key first (the case the signing delay is for)
    await elapse(4500);
    expect((await jwks(b.app)).keys.map((k) => k.kid)).toEqual([oldKid]);
    await elapse(250);

    const events: AuditEvent[] = [];
    const rotated = await createResultKeyRepository(db.db, TEST_SECRETS).rotate(
      await newResultSigningKey(),
      ROTATION_DELAY_SECONDS,
      { actor: 'alice', log: (e) => events.push(e) },
    );
    expect(events).toMatchObject([
      {
        action: 'result_keys.rotate',
        target: rotated.id,
        actor: 'alice',
        before: { kid: oldKid },
        after: { kid: rotated.id },
      },
    ]);
    expect(JSON.stringify(events)).not.toMatch(/private|BEGIN|"d"/);

    // step through the switch: whatever A signs with, B's JWKS has it at that moment
    const tokens: string[] = [];
    for (let t = 0; t <= (ROTATION_DELAY_SECONDS + 2) * 1000; t += 250) {
      const jwt = await resultToken(a.app);
      tokens.push(jwt);
      const published = await jwks(b.app);
      expect(published.keys.map((k) => k.kid)).toContain(kidOf(jwt));
      expect(await verifies(jwt, published)).toBe(true);
      await elapse(250);
    }
    // the switch happened, not before the delay
    const switchedAt = tokens.findIndex((t) => kidOf(t) === rotated.id);
    expect(switchedAt).toBeGreaterThan(0);
    expect(switchedAt * 250).toBeGreaterThanOrEqual(3000);
    expect(tokens.slice(switchedAt).every((t) => kidOf(t) === rotated.id)).toBe(true);
    // B signs with the new key too
    expect(kidOf(await resultToken(b.app))).toBe(rotated.id);

    // the last token of the old key verifies until it expires: its key stays published
    const lastOld = tokens[switchedAt - 1]!;
    await elapse((TTL - 10) * 1000);
    for (const app of [a.app, b.app]) {
      const set = await jwks(app);
      expect(set.keys.map((k) => k.kid).sort()).toEqual([oldKid, rotated.id].sort());
      expect(await verifies(lastOld, set)).toBe(true);
    }
    // ... and after it expired, for the grace hour
    await elapse((10 + RETIRED_KEY_GRACE_SECONDS - 60) * 1000);
    expect((await jwks(a.app)).keys.map((k) => k.kid)).toContain(oldKid);
    // then the retired key leaves every JWKS
    await elapse(120 * 1000);
    for (const app of [a.app, b.app])
      expect((await jwks(app)).keys.map((k) => k.kid)).toEqual([rotated.id]);
  });

  it('two rotations at once: both keys are published, the later one signs, nothing is lost', async () => {
    await a.signer.ensureKey();
    const repo = createResultKeyRepository(db.db, TEST_SECRETS);
    const [k1, k2] = await Promise.all([
      repo.rotate(await newResultSigningKey(), ROTATION_DELAY_SECONDS),
      repo.rotate(await newResultSigningKey(), ROTATION_DELAY_SECONDS),
    ]);
    await elapse((ROTATION_DELAY_SECONDS + 1) * 1000);
    const jwt = await resultToken(a.app);
    const later = (await repo.list()).at(-1)!.id;
    expect([k1.id, k2.id]).toContain(later);
    expect(kidOf(jwt)).toBe(later);
    expect(kidOf(await resultToken(b.app))).toBe(later);
    expect(await verifies(jwt, await jwks(b.app))).toBe(true);
    expect((await jwks(b.app)).keys).toHaveLength(3);
  });

  it('a private key sealed under another master key is a fault (HTTP 500), never an unsigned answer', async () => {
    const { createSecretBox } = await import('../../src/db/secretBox.js');
    const { testMasterKey } = await import('../support/secrets.js');
    await createResultKeyRepository(db.db, createSecretBox([testMasterKey(9)])).createFirst(
      await newResultSigningKey(),
    );
    const nonce = randomBytes(32);
    const res = await verify(a.app, key.key, {
      attestationToken: b64(token(nonce)),
      expectedNonce: nonce.toString('base64'),
    });
    expect(res.status).toBe(500);
    expect(await res.text()).not.toContain('isValid');
  });

  it('a master key rotation re-wraps the signing keys, and signing goes on under the new key with the same kid', async () => {
    const { createSecretBox } = await import('../../src/db/secretBox.js');
    const { testMasterKey } = await import('../support/secrets.js');
    const { rotateMasterKey, checkMasterKey } = await import('../../src/db/secrets.js');
    await checkMasterKey(db.db, TEST_SECRETS, { source: 'test' });
    await a.signer.ensureKey();
    const before = await resultToken(a.app);
    const newer = createSecretBox([testMasterKey(11), testMasterKey()]);
    const { rewrapped } = await rotateMasterKey(db.db, newer, 'test', {
      actor: 'test',
      log: () => {},
    });
    expect(rewrapped).toBeGreaterThanOrEqual(1);
    const ids = rowsOf<{ master_key_id: string }>(
      await db.db.execute(sql`select master_key_id from result_signing_keys`),
    ).map((r) => r.master_key_id);
    expect(ids).toEqual([testMasterKey(11).id]);
    // an instance started with the new key signs with the same key id
    const signer = createResultTokenSigner({
      keys: createResultKeyRepository(db.db, createSecretBox([testMasterKey(11)])),
      issuer: ISSUER,
      ttlSeconds: TTL,
      refreshMs: REFRESH_MS,
      now: () => clock,
    });
    const c = createTestService(db, { resultTokens: signer });
    const after = await resultToken(c.app);
    expect(kidOf(after)).toBe(kidOf(before));
    expect(await verifies(after, await jwks(b.app))).toBe(true);
  });
});
