/**
 * Test mode is a sandbox (issue 37): nothing a test-mode API key does changes what a live key
 * sees. Each store a verify writes is exercised through a test key with a live device's captured
 * evidence, then the live key's view is checked unchanged: android-key registrations (no squat),
 * android-key assertions (a replay is accepted once per mode, whichever key sends it), device
 * velocity counts (a test key's verifies and anyone's refused ones never count for live), App
 * Attest registrations and counters. Recall writes: test/server/deviceRecall.e2e.test.ts.
 */
import { randomBytes } from 'node:crypto';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import { createAppleKeyRepository } from '../../src/db/appleKeys.js';
import { createDeviceVelocityRepository } from '../../src/db/deviceVelocity.js';
import {
  ANDROID_NOW,
  ANDROID_PACKAGE,
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
  TEST_NOW,
  type TestCa,
} from '../support/appleFactory.js';
import { backends, useDatabase } from '../support/databases.js';
import { createPlatformService, issueKey, verifySessionless } from '../support/service.js';
import { TEST_SECRETS } from '../support/secrets.js';

let appleCa: TestCa;
let androidCa: AndroidTestCa;
beforeAll(async () => {
  [appleCa, androidCa] = await Promise.all([createTestCa(), createAndroidTestCa()]);
});

describe.each(backends())('test mode is a sandbox on $name', (backend) => {
  const db = useDatabase(backend);
  let live: string;
  let test: string;
  let clock: Date;
  let service: ReturnType<typeof createPlatformService>;

  beforeEach(async () => {
    live = (await issueKey(db, { name: 'live' })).key;
    test = (await issueKey(db, { name: 'ci', mode: 'test' })).key;
    clock = new Date(ANDROID_NOW);
    service = createPlatformService(db, {
      now: () => clock,
      appleRoots: appleCa.roots,
      androidRoots: androidCa.roots,
    });
  });

  /** One verify: isValid and the reason the request's log line gives. */
  async function send(key: string, token: Uint8Array, nonce: Buffer) {
    const res = await verifySessionless(service.app, key, () => token, nonce);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { isValid: boolean };
    return { valid: body.isValid, reason: service.logs.last().reason as string | undefined };
  }

  it('android-key: a test key that registers a captured registration first does not squat the live registration', async () => {
    await createAllowlistRepository(db.db, TEST_SECRETS).addAndroid(ANDROID_PACKAGE, null, {
      keyAttestation: true,
    });
    const nonce = randomBytes(32);
    const made = await androidRegistration(androidCa, { nonce });
    expect(await send(test, made.token, nonce)).toEqual({ valid: true, reason: undefined });
    // the live RP's registration of its own device, then its assertions
    expect(await send(live, made.token, nonce)).toEqual({ valid: true, reason: undefined });
    const n = randomBytes(32);
    expect((await send(live, Buffer.from(androidAssertion(made.device, n)), n)).valid).toBe(true);
  });

  it('android-key: one captured assertion is accepted once per mode, whichever key replays it (the RP own included); replays and a test key never spend the live limit', async () => {
    await createAllowlistRepository(db.db, TEST_SECRETS).addAndroid(ANDROID_PACKAGE, null, {
      keyAttestation: true,
      maxVerifiesPerDevice: { max: 5, periodSeconds: 3600 },
    });
    const nonce = randomBytes(32);
    const made = await androidRegistration(androidCa, { nonce });
    expect((await send(live, made.token, nonce)).valid).toBe(true);
    const captured = randomBytes(32);
    const assertion = Buffer.from(androidAssertion(made.device, captured));
    expect((await send(live, assertion, captured)).valid).toBe(true);
    // replayed through the live key (a second live key too): refused, not counted
    const other = (await issueKey(db, { name: 'other live' })).key;
    for (const key of [live, other])
      expect(await send(key, assertion, captured)).toEqual({
        valid: false,
        reason: 'android_assertion_replayed',
      });
    // a test key: it knows no live registration; with the captured registration it has its own,
    // where the replay is accepted once, and then refused, six times
    expect(await send(test, assertion, captured)).toEqual({
      valid: false,
      reason: 'android_key_unknown',
    });
    expect((await send(test, made.token, nonce)).valid).toBe(true);
    expect((await send(test, assertion, captured)).valid).toBe(true);
    for (let i = 0; i < 6; i++)
      expect((await send(test, assertion, captured)).reason).toBe('android_assertion_replayed');
    // the live view: registration + one assertion counted, and the device's next genuine
    // assertions go through up to the limit of 5
    const velocity = createDeviceVelocityRepository(db.db);
    const views = await velocity.show(made.device.keyId, clock);
    expect(views.map((v) => [v.mode, v.window?.count])).toEqual([
      ['live', 2],
      ['test', 2],
    ]);
    for (let i = 0; i < 3; i++) {
      const n = randomBytes(32);
      expect((await send(live, Buffer.from(androidAssertion(made.device, n)), n)).valid).toBe(true);
    }
    const n = randomBytes(32);
    expect(await send(live, Buffer.from(androidAssertion(made.device, n)), n)).toEqual({
      valid: false,
      reason: 'device_rate_exceeded',
    });
    // refused past the limit: not counted
    expect((await velocity.show(made.device.keyId, clock))[0]!.window!.count).toBe(5);
  });

  it('App Attest: a test key registering and asserting a live device leaves the live key, counter and count unchanged', async () => {
    clock = new Date(TEST_NOW);
    await createAllowlistRepository(db.db, TEST_SECRETS).addApple(
      TEST_APP_ID,
      'production',
      undefined,
      {
        maxVerifiesPerDevice: { max: 2, periodSeconds: 3600 },
      },
    );
    const device = await createDeviceKey();
    const nonce = randomBytes(32);
    const registration = encodeAppleToken({
      nonce,
      keyId: device.keyId,
      attestation: (await createAttestation(appleCa, device, { nonce })).attestation,
    });
    // the test key gets there first with the captured attestation, then asserts with counter 7
    expect((await send(test, registration, nonce)).valid).toBe(true);
    const n7 = randomBytes(32);
    const seven = encodeAppleToken({
      nonce: n7,
      keyId: device.keyId,
      assertion: createAssertion(device, { nonce: n7, counter: 7 }).assertion,
    });
    expect((await send(test, seven, n7)).valid).toBe(true);
    // the live key: its own registration, and counter 1 still works (the test key raised only its own)
    expect((await send(live, registration, nonce)).valid).toBe(true);
    const n1 = randomBytes(32);
    const one = encodeAppleToken({
      nonce: n1,
      keyId: device.keyId,
      assertion: createAssertion(device, { nonce: n1, counter: 1 }).assertion,
    });
    expect((await send(live, one, n1)).valid).toBe(true);
    const repo = createAppleKeyRepository(db.db);
    expect((await repo.find(device.keyId))?.counter).toBe(1);
    expect((await repo.find(device.keyId, 'test'))?.counter).toBe(7);
    const views = await createDeviceVelocityRepository(db.db).show(device.keyId, clock);
    expect(views.map((v) => [v.mode, v.window?.count])).toEqual([
      ['live', 2],
      ['test', 2],
    ]);
  });
});
