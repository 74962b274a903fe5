// App Attest end to end: HTTP app + real verifiers + real key store, on PGlite and PostgreSQL.
import { randomBytes } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import { createAppleKeyRepository } from '../../src/db/appleKeys.js';
import {
  createAssertion,
  createAttestation,
  createDeviceKey,
  createTestCa,
  encodeAppleToken,
  TEST_APP_ID,
  TEST_NOW,
  type TestCa,
} from '../support/appleFactory.js';
import { backends, postgresBackend, useDatabase, type TestDatabase } from '../support/databases.js';
import {
  createPlatformService,
  init,
  issueKey,
  verify,
  verifyInSession,
  verifySessionless,
} from '../support/service.js';

const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');

let ca: TestCa;
beforeAll(async () => {
  ca = await createTestCa();
});

const appleService = (db: TestDatabase) =>
  createPlatformService(db, { now: TEST_NOW, appleRoots: ca.roots });

describe.each(backends())('App Attest over HTTP on $name', (backend) => {
  const db = useDatabase(backend);
  let key: string;
  let service: ReturnType<typeof appleService>;

  beforeEach(async () => {
    key = (await issueKey(db)).key;
    await createAllowlistRepository(db.db, null).addApple(TEST_APP_ID, 'production');
    service = appleService(db);
  });

  /** session approach: init, build the token over the server nonce (and device nonce), verify */
  async function sessionVerify(
    build: (finalNonce: Buffer) => Promise<Buffer> | Buffer,
    deviceNonce?: Buffer,
  ) {
    const { res } = await verifyInSession(service.app, key, build, deviceNonce);
    expect(res.status).toBe(200);
    return { body: (await res.json()) as Record<string, unknown>, log: service.logs.last() };
  }

  async function sessionlessVerify(build: (finalNonce: Buffer) => Promise<Buffer> | Buffer) {
    const res = await verifySessionless(service.app, key, build);
    expect(res.status).toBe(200);
    return { body: (await res.json()) as Record<string, unknown>, log: service.logs.last() };
  }

  const approaches = [
    ['session', sessionVerify],
    ['sessionless', sessionlessVerify],
  ] as const;

  it.each(approaches)('registration, then assertions, then replay (%s)', async (_name, run) => {
    const device = await createDeviceKey();
    const registered = await run(async (nonce) =>
      encodeAppleToken({
        nonce,
        keyId: device.keyId,
        attestation: (await createAttestation(ca, device, { nonce })).attestation,
      }),
    );
    expect(registered.body).toEqual({
      isValid: true,
      statusCode: 0,
      appleTokenDetails: {
        keyIdentifier: b64(device.keyId),
        appId: TEST_APP_ID,
        environment: 'Production',
        assertionCounter: 0,
        platform: 'iOS',
      },
    });

    const first = await run((nonce) =>
      encodeAppleToken({
        nonce,
        keyId: device.keyId,
        assertion: createAssertion(device, { nonce, counter: 1 }).assertion,
      }),
    );
    expect(first.body).toMatchObject({
      isValid: true,
      appleTokenDetails: { assertionCounter: 1 },
    });

    const replay = await run((nonce) =>
      encodeAppleToken({
        nonce,
        keyId: device.keyId,
        assertion: createAssertion(device, { nonce, counter: 1 }).assertion,
      }),
    );
    expect(replay.body).toEqual({ isValid: false, statusCode: 0 });
    expect(replay.log).toMatchObject({
      reason: 'apple_counter_replay',
      service: 'apple',
      keyId: b64(device.keyId),
    });

    const again = await run(async (nonce) =>
      encodeAppleToken({
        nonce,
        keyId: device.keyId,
        attestation: (await createAttestation(ca, device, { nonce })).attestation,
      }),
    );
    expect(again.log).toMatchObject({ isValid: false, reason: 'apple_key_registered' });
    expect((await createAppleKeyRepository(db.db).find(device.keyId))?.counter).toBe(1);
  });

  it.each(approaches)(
    'attestation plus assertion registers the key with the assertion counter (%s)',
    async (_name, run) => {
      const device = await createDeviceKey();
      // the attestation was made at key creation, for another nonce; the assertion carries freshness
      const attestation = (await createAttestation(ca, device, { nonce: randomBytes(32) }))
        .attestation;
      const result = await run((nonce) =>
        encodeAppleToken({
          nonce,
          keyId: device.keyId,
          attestation,
          assertion: createAssertion(device, { nonce, counter: 3 }).assertion,
        }),
      );
      expect(result.body).toMatchObject({
        isValid: true,
        appleTokenDetails: { assertionCounter: 3 },
      });
      expect((await createAppleKeyRepository(db.db).find(device.keyId))?.counter).toBe(3);
      const next = await run((nonce) =>
        encodeAppleToken({
          nonce,
          keyId: device.keyId,
          attestation,
          assertion: createAssertion(device, { nonce, counter: 4 }).assertion,
        }),
      );
      expect(next.body).toMatchObject({
        isValid: true,
        appleTokenDetails: { assertionCounter: 4 },
      });
    },
  );

  it('receipts: an invalid one registers, logged with what failed and counted; --require-receipt rejects it', async () => {
    const device = await createDeviceKey();
    const token = (nonce: Buffer) =>
      createAttestation(ca, device, { nonce }).then(({ attestation }) =>
        encodeAppleToken({ nonce, keyId: device.keyId, attestation }),
      );
    const ok = await sessionlessVerify(token);
    expect(ok.body).toMatchObject({ isValid: true });
    expect(ok.log).toMatchObject({ receipt: 'invalid', receiptProblem: expect.any(String) });
    expect(await service.metrics.registry.metrics()).toContain(
      'attest_apple_receipts_total{outcome="invalid"} 1',
    );
    const stored = await createAppleKeyRepository(db.db).receipt(device.keyId);
    expect(stored).toMatchObject({ problem: expect.any(String), refreshable: false });

    await createAllowlistRepository(db.db, null).addApple(TEST_APP_ID, undefined, undefined, {
      requireReceipt: true,
    });
    const other = await createDeviceKey();
    const refused = await sessionlessVerify(async (nonce) =>
      encodeAppleToken({
        nonce,
        keyId: other.keyId,
        attestation: (await createAttestation(ca, other, { nonce })).attestation,
      }),
    );
    expect(refused.body).toMatchObject({ isValid: false });
    expect(refused.log).toMatchObject({ reason: 'apple_receipt_invalid', receipt: 'invalid' });
  });

  it("risk metric: a refreshed receipt's metric is in the details, and --max-risk-metric rejects above it", async () => {
    const device = await createDeviceKey();
    await sessionlessVerify(async (nonce) =>
      encodeAppleToken({
        nonce,
        keyId: device.keyId,
        attestation: (await createAttestation(ca, device, { nonce })).attestation,
      }),
    );
    // what the refresher stores after a 200 from Apple
    await db.db.execute(
      sql`update apple_keys set risk_metric = 4 where key_id = ${Buffer.from(device.keyId)}`,
    );
    // an instance that has not seen the key within the last minute reads the row (the key's row
    // is re-read at least once a minute, docs/token-format.md)
    service = appleService(db);
    const assert = (counter: number) => (nonce: Buffer) =>
      encodeAppleToken({
        nonce,
        keyId: device.keyId,
        assertion: createAssertion(device, { nonce, counter }).assertion,
      });
    const within = await sessionlessVerify(assert(1));
    expect(within.body).toMatchObject({ isValid: true, appleTokenDetails: { riskMetric: 4 } });
    await createAllowlistRepository(db.db, null).addApple(TEST_APP_ID, undefined, undefined, {
      maxRiskMetric: 3,
    });
    const above = await sessionlessVerify(assert(2));
    expect(above.body).toMatchObject({ isValid: false });
    expect(above.log).toMatchObject({ reason: 'apple_risk_exceeded' });
  });

  it('binds the device nonce: a token over the server nonce alone is rejected when a device nonce is sent', async () => {
    const device = await createDeviceKey();
    const deviceNonce = randomBytes(16);
    const ok = await sessionVerify(
      async (nonce) =>
        encodeAppleToken({
          nonce,
          keyId: device.keyId,
          attestation: (await createAttestation(ca, device, { nonce })).attestation,
        }),
      deviceNonce,
    );
    expect(ok.body).toMatchObject({ isValid: true });

    const { body } = await init(service.app, key);
    const serverNonce = Buffer.from(body.serverNonce, 'base64');
    const token = encodeAppleToken({
      nonce: serverNonce,
      keyId: device.keyId,
      assertion: createAssertion(device, { nonce: serverNonce, counter: 2 }).assertion,
    });
    const res = await verify(service.app, key, {
      attestationToken: b64(token),
      sessionReference: body.sessionReference,
      deviceNonce: b64(deviceNonce),
    });
    expect(await res.json()).toEqual({ isValid: false, statusCode: 0 });
    expect(service.logs.last()).toMatchObject({ reason: 'nonce_mismatch' });
  });

  it('stops a registered key when its app leaves the allowlist', async () => {
    const device = await createDeviceKey();
    await sessionlessVerify(async (nonce) =>
      encodeAppleToken({
        nonce,
        keyId: device.keyId,
        attestation: (await createAttestation(ca, device, { nonce })).attestation,
      }),
    );
    await createAllowlistRepository(db.db, null).removeApple(TEST_APP_ID);
    const after = await sessionlessVerify((nonce) =>
      encodeAppleToken({
        nonce,
        keyId: device.keyId,
        assertion: createAssertion(device, { nonce, counter: 1 }).assertion,
      }),
    );
    expect(after.body).toEqual({ isValid: false, statusCode: 0 });
    expect(after.log).toMatchObject({ reason: 'apple_app_not_allowed' });
    // the rejected assertion did not raise the counter
    expect((await createAppleKeyRepository(db.db).find(device.keyId))?.counter).toBe(0);
  });
});

const pg = postgresBackend();
describe.skipIf(!pg)('App Attest counter races on PostgreSQL', () => {
  let db: TestDatabase;
  let key: string;
  let service: ReturnType<typeof appleService>;

  beforeAll(async () => {
    db = await pg!.open();
    key = (await issueKey(db)).key;
    await createAllowlistRepository(db.db, null).addApple(TEST_APP_ID, 'production');
    service = appleService(db);
  });
  afterAll(async () => {
    await db?.close();
  });

  async function register() {
    const device = await createDeviceKey();
    const nonce = randomBytes(32);
    const token = encodeAppleToken({
      nonce,
      keyId: device.keyId,
      attestation: (await createAttestation(ca, device, { nonce })).attestation,
    });
    const res = await verify(service.app, key, {
      attestationToken: b64(token),
      expectedNonce: b64(nonce),
    });
    expect(await res.json()).toMatchObject({ isValid: true });
    return device;
  }

  async function assertWith(device: Awaited<ReturnType<typeof createDeviceKey>>, counter: number) {
    const nonce = randomBytes(32);
    const token = encodeAppleToken({
      nonce,
      keyId: device.keyId,
      assertion: createAssertion(device, { nonce, counter }).assertion,
    });
    const res = await verify(service.app, key, {
      attestationToken: b64(token),
      expectedNonce: b64(nonce),
    });
    return ((await res.json()) as { isValid: boolean }).isValid;
  }

  it('accepts exactly one of many concurrent assertions with the same counter (repeated)', async () => {
    const device = await register();
    for (let round = 1; round <= 5; round++) {
      const results = await Promise.all(
        Array.from({ length: 20 }, () => assertWith(device, round)),
      );
      expect(results.filter(Boolean)).toHaveLength(1);
    }
    expect((await createAppleKeyRepository(db.db).find(device.keyId))?.counter).toBe(5);
  });

  it('keeps the counter strictly increasing under shuffled distinct counters', async () => {
    const device = await register();
    const counters = Array.from({ length: 40 }, (_, i) => i + 1).sort(() => Math.random() - 0.5);
    // sequentially: exactly the running maxima are accepted
    const accepted: number[] = [];
    for (const c of counters.slice(0, 20)) if (await assertWith(device, c)) accepted.push(c);
    let max = 0;
    expect(accepted).toEqual(
      counters.slice(0, 20).filter((c) => (c > max ? ((max = c), true) : false)),
    );
    // concurrently: whatever wins, the stored counter ends at the maximum accepted, never lower
    const rest = counters.slice(20);
    const results = await Promise.all(rest.map((c) => assertWith(device, c)));
    const acceptedConcurrently = rest.filter((_, i) => results[i]);
    const stored = (await createAppleKeyRepository(db.db).find(device.keyId))!.counter;
    expect(stored).toBe(Math.max(max, ...acceptedConcurrently));
    for (const c of acceptedConcurrently) expect(c).toBeGreaterThan(max);
    if (Math.max(...rest) > max) expect(stored).toBe(Math.max(...rest));
  });

  it('registers a key once when many registrations race', async () => {
    const device = await createDeviceKey();
    const tokens = await Promise.all(
      Array.from({ length: 10 }, async () => {
        const nonce = randomBytes(32);
        return {
          nonce,
          token: encodeAppleToken({
            nonce,
            keyId: device.keyId,
            attestation: (await createAttestation(ca, device, { nonce })).attestation,
          }),
        };
      }),
    );
    const results = await Promise.all(
      tokens.map(
        async ({ nonce, token }) =>
          (
            (await (
              await verify(service.app, key, {
                attestationToken: b64(token),
                expectedNonce: b64(nonce),
              })
            ).json()) as { isValid: boolean }
          ).isValid,
      ),
    );
    expect(results.filter(Boolean)).toHaveLength(1);
  });
});
