// App-scoped API keys end to end: HTTP app + real verifiers + real stores, on PGlite and
// PostgreSQL. A key scoped to some apps verifies their tokens and refuses every other app's with
// app_not_in_key_scope (logged and counted, never in the answer), on each evidence kind, and the
// refusal changes no state: the other app's key registrations and counters are untouched.
import { randomBytes } from 'node:crypto';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import { createAndroidKeyRepository } from '../../src/db/androidKeys.js';
import { createApiKeyRepository } from '../../src/db/apiKeys.js';
import { createAppleKeyRepository } from '../../src/db/appleKeys.js';
import {
  ANDROID_NOW,
  APP_DIGEST,
  androidAssertion,
  androidRegistration,
  createAndroidTestCa,
  type AndroidTestCa,
} from '../support/androidFactory.js';
import {
  createAssertion,
  createAttestation,
  createDeviceKey,
  createTestCa,
  encodeAppleToken,
  TEST_APP_ID,
  type TestCa,
} from '../support/appleFactory.js';
import { encodeEnvelope } from '../../src/core/envelope.js';
import { backends, useDatabase } from '../support/databases.js';
import {
  createGoogleTestKeys,
  keyPairOf,
  mintIntegrityToken,
  TEST_CERT_DIGEST,
  TEST_PACKAGE,
  type GoogleTestKeys,
} from '../support/googleFactory.js';
import { BASE, createPlatformService, issueKey, verifySessionless } from '../support/service.js';
import { TEST_SECRETS } from '../support/secrets.js';

const NOW = ANDROID_NOW;
const OTHER_APP = 'ABCDE12345.com.example.other';
const OTHER_PACKAGE = 'com.example.other';
// TEST_PACKAGE is also the android-key factory's package
const SCOPE = [TEST_APP_ID, TEST_PACKAGE];

let appleCa: TestCa;
let androidCa: AndroidTestCa;
let ours: GoogleTestKeys;
let theirs: GoogleTestKeys;
beforeAll(async () => {
  [appleCa, androidCa, ours, theirs] = await Promise.all([
    createTestCa(),
    createAndroidTestCa(),
    createGoogleTestKeys('ours'),
    createGoogleTestKeys('theirs'),
  ]);
});

/** a format-1 `gms` token */
function gmsToken(nonce: Uint8Array, integrityToken: string, packageName: string): Uint8Array {
  return encodeEnvelope({
    nonce,
    service: 'gms',
    evidence: new Map<string, unknown>([
      ['packageName', packageName],
      ['integrityToken', integrityToken],
    ]),
  });
}

describe.each(backends())('app-scoped API keys on $name', (backend) => {
  const db = useDatabase(backend);
  let scoped: { id: string; key: string };
  let unscoped: { id: string; key: string };
  let service: ReturnType<typeof createPlatformService>;

  beforeEach(async () => {
    scoped = await issueKey(db, { name: 'ios and android backend', apps: SCOPE });
    unscoped = await issueKey(db, { name: 'everything' });
    const allowlist = createAllowlistRepository(db.db, TEST_SECRETS);
    for (const appId of [TEST_APP_ID, OTHER_APP]) await allowlist.addApple(appId, 'production');
    // each package: its Play Integrity pair, key attestation, and both evidence kinds' digests
    for (const [name, pair] of [
      [TEST_PACKAGE, ours],
      [OTHER_PACKAGE, theirs],
    ] as const)
      await allowlist.addAndroid(name, keyPairOf(pair), {
        certificateDigests: [TEST_CERT_DIGEST, APP_DIGEST],
        keyAttestation: true,
      });
    service = createPlatformService(db, {
      now: NOW,
      appleRoots: appleCa.roots,
      androidRoots: androidCa.roots,
    });
  });

  async function run(
    key: { key: string },
    build: (nonce: Buffer) => Promise<Uint8Array> | Uint8Array,
  ) {
    const res = await verifySessionless(service.app, key.key, build);
    expect(res.status).toBe(200);
    return { body: (await res.json()) as Record<string, unknown>, log: service.logs.last() };
  }
  const refusedForScope = (r: { body: Record<string, unknown>; log: Record<string, unknown> }) => {
    // the answer is the plain refusal: the reason stays in the log
    expect(r.body).toEqual({ isValid: false, statusCode: 0 });
    expect(r.log).toMatchObject({ isValid: false, reason: 'app_not_in_key_scope' });
  };

  const appleRegistration =
    (device: Awaited<ReturnType<typeof createDeviceKey>>, appId: string) => async (nonce: Buffer) =>
      encodeAppleToken({
        nonce,
        keyId: device.keyId,
        attestation: (await createAttestation(appleCa, device, { nonce, appId })).attestation,
      });
  const appleAssertion =
    (device: Awaited<ReturnType<typeof createDeviceKey>>, appId: string, counter: number) =>
    (nonce: Buffer) =>
      encodeAppleToken({
        nonce,
        keyId: device.keyId,
        assertion: createAssertion(device, { nonce, appId, counter }).assertion,
      });

  it('apple: registration and assertion of an app in scope are valid; of another app refused, nothing registered or counted', async () => {
    const mine = await createDeviceKey();
    expect((await run(scoped, appleRegistration(mine, TEST_APP_ID))).body).toMatchObject({
      isValid: true,
      appleTokenDetails: { appId: TEST_APP_ID },
    });
    expect((await run(scoped, appleAssertion(mine, TEST_APP_ID, 1))).body).toMatchObject({
      isValid: true,
      appleTokenDetails: { assertionCounter: 1 },
    });

    const other = await createDeviceKey();
    const keys = createAppleKeyRepository(db.db);
    const refused = await run(scoped, appleRegistration(other, OTHER_APP));
    refusedForScope(refused);
    expect(refused.log).toMatchObject({
      apiKeyId: scoped.id,
      service: 'apple',
      appId: OTHER_APP,
      detail: expect.stringContaining(OTHER_APP),
    });
    expect(await keys.find(other.keyId)).toBeNull();
    // the other app's own backend (an unscoped key here) registers the same attestation later
    expect((await run(unscoped, appleRegistration(other, OTHER_APP))).body).toMatchObject({
      isValid: true,
    });
    // an assertion of the other app's key: refused before its counter moves
    refusedForScope(await run(scoped, appleAssertion(other, OTHER_APP, 5)));
    expect((await keys.find(other.keyId))?.counter).toBe(0);
    expect((await run(unscoped, appleAssertion(other, OTHER_APP, 5))).body).toMatchObject({
      isValid: true,
      appleTokenDetails: { assertionCounter: 5 },
    });
  });

  it('apple: attestation plus assertion of another app is refused at the assertion, nothing registered', async () => {
    const other = await createDeviceKey();
    const both = async (nonce: Buffer) =>
      encodeAppleToken({
        nonce,
        keyId: other.keyId,
        attestation: (await createAttestation(appleCa, other, { appId: OTHER_APP })).attestation,
        assertion: createAssertion(other, { nonce, appId: OTHER_APP, counter: 1 }).assertion,
      });
    refusedForScope(await run(scoped, both));
    expect(await createAppleKeyRepository(db.db).find(other.keyId)).toBeNull();
    expect((await run(unscoped, both)).body).toMatchObject({ isValid: true });
  });

  it('gms: the package in scope is valid; another package refused (packageName logged)', async () => {
    const token = (pkg: string, pair: GoogleTestKeys) => async (nonce: Buffer) =>
      gmsToken(
        nonce,
        await mintIntegrityToken({ keys: pair, nonce, now: NOW, packageName: pkg }),
        pkg,
      );
    expect((await run(scoped, token(TEST_PACKAGE, ours))).body).toMatchObject({
      isValid: true,
      googleTokenDetails: { packageName: TEST_PACKAGE },
    });
    const refused = await run(scoped, token(OTHER_PACKAGE, theirs));
    refusedForScope(refused);
    expect(refused.log).toMatchObject({ service: 'gms', packageName: OTHER_PACKAGE });
    expect((await run(unscoped, token(OTHER_PACKAGE, theirs))).body).toMatchObject({
      isValid: true,
    });
  });

  it('gms: a token that claims another package but fails its signature keeps its own reason', async () => {
    // the scope applies to the package the verdict proves, not to a claim
    const forged = async (nonce: Buffer) =>
      gmsToken(
        nonce,
        await mintIntegrityToken({
          keys: theirs,
          nonce,
          now: NOW,
          packageName: OTHER_PACKAGE,
          jws: { signWith: ours },
        }),
        OTHER_PACKAGE,
      );
    const r = await run(scoped, forged);
    expect(r.log).toMatchObject({ isValid: false, reason: 'gms_signature_invalid' });
  });

  it('android-key: registration and assertion in scope are valid; another package refused, no key stored', async () => {
    const mine = await androidRegistration(androidCa, { nonce: randomBytes(32) });
    expect(
      (
        await run(
          scoped,
          async (nonce) =>
            (await androidRegistration(androidCa, { nonce, device: mine.device })).token,
        )
      ).body,
    ).toMatchObject({ isValid: true, androidKeyDetails: { packageName: TEST_PACKAGE } });
    expect((await run(scoped, (nonce) => androidAssertion(mine.device, nonce))).body).toMatchObject(
      {
        isValid: true,
      },
    );

    const keys = createAndroidKeyRepository(db.db);
    const other = (
      await androidRegistration(androidCa, { nonce: randomBytes(32), packageName: OTHER_PACKAGE })
    ).device;
    const register = async (nonce: Buffer) =>
      (await androidRegistration(androidCa, { nonce, device: other, packageName: OTHER_PACKAGE }))
        .token;
    const refused = await run(scoped, register);
    refusedForScope(refused);
    expect(refused.log).toMatchObject({ service: 'android-key', packageName: OTHER_PACKAGE });
    expect(await keys.find(other.keyId)).toBeNull();
    expect((await run(unscoped, register)).body).toMatchObject({ isValid: true });
    refusedForScope(
      await run(scoped, (nonce) => androidAssertion(other, nonce, { packageName: OTHER_PACKAGE })),
    );
    expect(
      (
        await run(unscoped, (nonce) =>
          androidAssertion(other, nonce, { packageName: OTHER_PACKAGE }),
        )
      ).body,
    ).toMatchObject({ isValid: true });
  });

  it('a refusal for scope is counted under its reason in /metrics', async () => {
    const other = await createDeviceKey();
    refusedForScope(await run(scoped, appleRegistration(other, OTHER_APP)));
    const text = await (await service.app.request(`${BASE}/metrics`)).text();
    expect(text).toMatch(
      /attest_verify_total\{service="apple",valid="false",reason="app_not_in_key_scope",mode="live"\} 1/,
    );
  });

  it('an app not allowlisted stays apple_app_not_allowed, even in scope: a scope narrows the allowlist', async () => {
    const keyForUnlisted = await issueKey(db, { apps: ['ABCDE12345.com.example.unlisted'] });
    const device = await createDeviceKey();
    const r = await run(
      keyForUnlisted,
      appleRegistration(device, 'ABCDE12345.com.example.unlisted'),
    );
    expect(r.log).toMatchObject({ isValid: false, reason: 'apple_app_not_allowed' });
  });

  it('a scope change reaches the running app at its next row re-read (revalidation), and --all-apps lifts it', async () => {
    let t = Date.now();
    service = createPlatformService(db, {
      now: NOW,
      appleRoots: appleCa.roots,
      androidRoots: androidCa.roots,
      auth: { now: () => t, revalidateMs: 5000 },
    });
    const repo = createApiKeyRepository(db.db);
    const device = await createDeviceKey();
    const register = appleRegistration(device, OTHER_APP);
    refusedForScope(await run(scoped, register));
    expect(await repo.setApps(scoped.id, [OTHER_APP, TEST_APP_ID])).toMatchObject({
      found: true,
      changed: true,
    });
    // the cached verification still holds the old scope until the revalidation time passes
    refusedForScope(await run(scoped, register));
    t += 5000;
    expect((await run(scoped, register)).body).toMatchObject({ isValid: true });

    await repo.setApps(scoped.id, [TEST_APP_ID]);
    service.auth.revalidateAll(); // what an admin-socket change or a NOTIFY does: at once
    const assertion = appleAssertion(device, OTHER_APP, 1);
    refusedForScope(await run(scoped, assertion));
    await repo.setApps(scoped.id, null);
    service.auth.revalidateAll();
    expect((await run(scoped, assertion)).body).toMatchObject({ isValid: true });
  });
});
