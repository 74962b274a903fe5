// Android key attestation end to end: HTTP app + real verifiers + real key store and status list,
// on PGlite and PostgreSQL, with chains from a private CA (what ATTEST_ANDROID_ROOT_CA configures).
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/client.js';
import type { DatabaseHandle } from '../../src/db/database.js';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import { signAndroidAssertion } from '../../src/core/dev/androidKeyMint.js';
import { createAndroidKeyRepository } from '../../src/db/androidKeys.js';
import { createRevocationRepository } from '../../src/db/androidRevocations.js';
import {
  ANDROID_NOW,
  ANDROID_PACKAGE,
  androidAssertion,
  androidRegistration,
  createAndroidTestCa,
  type AndroidTestCa,
} from '../support/androidFactory.js';
import { backends, postgresBackend, useDatabase, type TestDatabase } from '../support/databases.js';
import {
  createPlatformService,
  issueKey,
  verify,
  verifyInSession,
  verifySessionless,
} from '../support/service.js';
import { defaultAppleRoots } from '../../src/core/apple/trustRoots.js';
import { TEST_SECRETS } from '../support/secrets.js';

let ca: AndroidTestCa;
beforeAll(async () => {
  ca = await createAndroidTestCa();
});

const androidService = (db: DatabaseHandle) =>
  createPlatformService(db, {
    now: ANDROID_NOW,
    appleRoots: defaultAppleRoots(),
    androidRoots: ca.roots,
  });

async function allowPackage(db: DatabaseHandle) {
  await createAllowlistRepository(db.db, TEST_SECRETS).addAndroid(ANDROID_PACKAGE, null, {
    keyAttestation: true,
  });
}

describe.each(backends())('android-key over HTTP on $name', (backend) => {
  const db = useDatabase(backend);
  let key: string;
  let service: ReturnType<typeof androidService>;

  beforeEach(async () => {
    key = (await issueKey(db)).key;
    await allowPackage(db);
    service = androidService(db);
  });

  const approaches = [
    [
      'session',
      async (build: (nonce: Buffer) => Promise<Uint8Array> | Uint8Array) =>
        (await verifyInSession(service.app, key, build)).res,
    ],
    [
      'sessionless',
      (build: (nonce: Buffer) => Promise<Uint8Array> | Uint8Array) =>
        verifySessionless(service.app, key, build),
    ],
  ] as const;

  it.each(approaches)('registration, then assertions (%s)', async (_name, run) => {
    let device: Awaited<ReturnType<typeof androidRegistration>>['device'] | undefined;
    const res = await run(async (nonce) => {
      const made = await androidRegistration(ca, { nonce });
      device = made.device;
      return made.token;
    });
    expect(res.status).toBe(200);
    const keyIdentifier = Buffer.from(device!.keyId).toString('base64');
    expect(await res.json()).toEqual({
      isValid: true,
      statusCode: 0,
      androidKeyDetails: {
        keyIdentifier,
        packageName: ANDROID_PACKAGE,
        securityLevel: 'TrustedEnvironment',
        verifiedBootState: 'Verified',
        deviceLocked: true,
        osPatchLevel: 202611,
        attestationVersion: 300,
      },
    });
    expect(service.logs.last()).toMatchObject({
      service: 'android-key',
      keyId: keyIdentifier,
      packageName: ANDROID_PACKAGE,
      isValid: true,
    });
    for (let i = 0; i < 3; i++) {
      const asserted = await run((nonce) => androidAssertion(device!, nonce));
      expect(((await asserted.json()) as { isValid: boolean }).isValid).toBe(true);
    }
    // the same registration again: refused, and the stored key is untouched
    const again = await run(
      async (nonce) => (await androidRegistration(ca, { nonce, device })).token,
    );
    expect(((await again.json()) as { isValid: boolean }).isValid).toBe(false);
    expect(service.logs.last().reason).toBe('android_key_registered');
    expect(await createAndroidKeyRepository(db.db).list()).toHaveLength(1);
  });

  it('an assertion over another nonce, and for an unknown key', async () => {
    const nonce = randomBytes(32);
    const made = await androidRegistration(ca, { nonce });
    await verifySessionless(service.app, key, () => made.token, nonce);
    const other = await verifySessionless(service.app, key, (n) =>
      androidAssertion(made.device, n, {
        signature: signAndroidAssertion(made.device, randomBytes(32)),
      }),
    );
    expect(((await other.json()) as { isValid: boolean }).isValid).toBe(false);
    expect(service.logs.last().reason).toBe('android_signature_invalid');
    const stranger = (await androidRegistration(ca, { nonce: randomBytes(32) })).device;
    await verifySessionless(service.app, key, (n) => androidAssertion(stranger, n));
    expect(service.logs.last().reason).toBe('android_key_unknown');
  });

  it('a leaf revoked in the stored status list; /metrics counts the reason', async () => {
    await createRevocationRepository(db.db).replace(
      new Map([[0x5eedn, { status: 'REVOKED', reason: 'KEY_COMPROMISE' }]]),
      'test',
      ANDROID_NOW,
    );
    const res = await verifySessionless(
      service.app,
      key,
      async (nonce) => (await androidRegistration(ca, { nonce, serialHex: '5eed' })).token,
    );
    expect(((await res.json()) as { isValid: boolean }).isValid).toBe(false);
    expect(service.logs.last().reason).toBe('android_chain_revoked');
    const metrics = await service.metrics.registry.metrics();
    expect(metrics).toMatch(
      /attest_verify_total\{service="android-key",valid="false",reason="android_chain_revoked",mode="live"\} 1/,
    );
  });

  it('a package without key attestation is refused; the response never says why', async () => {
    await createAllowlistRepository(db.db, TEST_SECRETS).addAndroid(ANDROID_PACKAGE, null, {
      keyAttestation: false,
    });
    const res = await verifySessionless(
      service.app,
      key,
      async (nonce) => (await androidRegistration(ca, { nonce })).token,
    );
    expect(await res.json()).toEqual({ isValid: false, statusCode: 0 });
    expect(service.logs.last().reason).toBe('android_package_not_allowed');
  });
});

const pg = postgresBackend();
describe.skipIf(!pg)('two instances on one PostgreSQL database', () => {
  let db: TestDatabase;
  let second: DatabaseHandle;
  beforeAll(async () => {
    db = await pg!.open();
    second = await openDatabase({ url: db.url!, dataDir: '', role: 'server', poolSize: 20 });
  });
  afterAll(async () => {
    await second?.close();
    await db?.close();
  });

  it('50 parallel registrations of one key: registered once, 49 android_key_registered', async () => {
    const { key } = await issueKey(db);
    await allowPackage(db);
    const a = androidService(db);
    const b = androidService(second);
    const nonce = randomBytes(32);
    const made = await androidRegistration(ca, { nonce });
    const body = {
      attestationToken: Buffer.from(made.token).toString('base64'),
      expectedNonce: nonce.toString('base64'),
    };
    const results = await Promise.all(
      Array.from({ length: 50 }, async (_, i) => {
        const res = await verify((i % 2 ? b : a).app, key, body);
        expect(res.status).toBe(200);
        return (await res.json()) as { isValid: boolean };
      }),
    );
    expect(results.filter((r) => r.isValid)).toHaveLength(1);
    const reasons = [...a.logs.requests(), ...b.logs.requests()].map((l) => l.reason ?? 'valid');
    expect(reasons.filter((r) => r === 'android_key_registered')).toHaveLength(49);
    expect(await createAndroidKeyRepository(db.db).list()).toHaveLength(1);
    // both instances accept the key's assertions
    for (const instance of [a, b]) {
      const res = await verifySessionless(instance.app, key, (n) =>
        androidAssertion(made.device, n),
      );
      expect(((await res.json()) as { isValid: boolean }).isValid).toBe(true);
    }
  });
});
