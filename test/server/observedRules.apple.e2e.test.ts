// Observed rules for App Attest end to end: the observe set stored on the app row (PGlite and
// PostgreSQL), minted attestations and assertions failing each observable rule, at registration
// and at assertion, the HTTP answer and the log line.
import { sql } from 'drizzle-orm';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { OBSERVABLE_REASONS } from '../../src/core/observedRules.js';
import * as x509 from '@peculiar/x509';
import {
  APPLE_KEY_ACCESS_CONTROL_OID,
  APPLE_OS_INFO_OID,
} from '../../src/core/apple/nonceExtension.js';
import { DEV_KEY_ACCESS_CONTROL, devOsInformation } from '../../src/core/dev/devCa.js';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import type { ApplePolicyInput } from '../../src/db/appleAppRows.js';
import {
  createAssertion,
  createAttestation,
  createDeviceKey,
  createTestCa,
  encodeAppleToken,
  TEST_APP_ID,
  TEST_NOW,
  type AttestationOptions,
  type DeviceKey,
  type TestCa,
} from '../support/appleFactory.js';
import { backends, useDatabase } from '../support/databases.js';
import { createPlatformService, issueKey, verifySessionless } from '../support/service.js';

type Body = Record<string, unknown>;

let ca: TestCa;
beforeAll(async () => {
  ca = await createTestCa();
});

describe.each(backends())('observed App Attest rules on $name', (backend) => {
  const db = useDatabase(backend);
  let key: string;
  let service: ReturnType<typeof createPlatformService>;
  const change = (policy: ApplePolicyInput) =>
    createAllowlistRepository(db.db, null).addApple(TEST_APP_ID, undefined, undefined, policy);

  beforeEach(async () => {
    key = (await issueKey(db)).key;
    await createAllowlistRepository(db.db, null).addApple(TEST_APP_ID, 'production');
    service = createPlatformService(db, { now: TEST_NOW, appleRoots: ca.roots });
  });

  async function send(build: (nonce: Buffer) => Promise<Buffer> | Buffer) {
    const res = await verifySessionless(service.app, key, build);
    expect(res.status).toBe(200);
    return { body: (await res.json()) as Body, log: service.logs.last() };
  }
  const register = (device: DeviceKey, options: AttestationOptions = {}) =>
    send(async (nonce) =>
      encodeAppleToken({
        nonce,
        keyId: device.keyId,
        attestation: (await createAttestation(ca, device, { ...options, nonce })).attestation,
      }),
    );
  const assert = (device: DeviceKey, counter: number) =>
    send((nonce) =>
      encodeAppleToken({
        nonce,
        keyId: device.keyId,
        assertion: createAssertion(device, { nonce, counter }).assertion,
      }),
    );

  /** the answer of a valid verify: the usual fields only, nothing about observed rules */
  function expectValidAnswer(body: Body, code: string) {
    expect(body).toMatchObject({ isValid: true, statusCode: 0, appleTokenDetails: {} });
    expect(Object.keys(body).sort()).toEqual(['appleTokenDetails', 'isValid', 'statusCode']);
    expect(JSON.stringify(body)).not.toContain(code);
  }

  it('the tests below cover every observable apple code', () => {
    expect([...OBSERVABLE_REASONS.apple].sort()).toEqual(
      [
        'apple_environment_not_allowed',
        'apple_receipt_invalid',
        'apple_risk_exceeded',
        'apple_distribution_not_allowed',
        'apple_platform_not_allowed',
        // observed past the per-device limit: test/server/deviceVelocity.e2e.test.ts
        'device_rate_exceeded',
      ].sort(),
    );
  });

  it('apple_environment_not_allowed: observed, a development key registers and asserts; enforced, its assertions are refused as before (apple_app_not_allowed)', async () => {
    const code = 'apple_environment_not_allowed';
    const enforced = await register(await createDeviceKey(), { environment: 'Development' });
    expect(enforced.body).toEqual({ isValid: false, statusCode: 0 });
    expect(enforced.log).toMatchObject({ reason: code });

    await change({ observeChange: { observe: [code] } });
    const device = await createDeviceKey();
    const registered = await register(device, { environment: 'Development' });
    expectValidAnswer(registered.body, code);
    expect(registered.body).toMatchObject({ appleTokenDetails: { environment: 'Development' } });
    expect(registered.log).toMatchObject({ isValid: true, observed: [code] });

    const asserted = await assert(device, 1);
    expectValidAnswer(asserted.body, code);
    expect(asserted.log).toMatchObject({ isValid: true, observed: [code] });

    await change({ observeChange: { enforce: 'all' } });
    const refused = await assert(device, 2);
    expect(refused.body).toEqual({ isValid: false, statusCode: 0 });
    expect(refused.log).toMatchObject({ reason: 'apple_app_not_allowed' });
    expect(refused.log.observed).toBeUndefined();
  });

  it('apple_receipt_invalid (--require-receipt): observed, the key registers with its receipt problem logged', async () => {
    const code = 'apple_receipt_invalid';
    await change({ requireReceipt: true });
    const enforced = await register(await createDeviceKey());
    expect(enforced.log).toMatchObject({ isValid: false, reason: code, receipt: 'invalid' });

    await change({ observeChange: { observe: [code] } });
    const observed = await register(await createDeviceKey());
    expectValidAnswer(observed.body, code);
    expect(observed.log).toMatchObject({ isValid: true, observed: [code], receipt: 'invalid' });

    await change({ observeChange: { enforce: [code] } });
    expect((await register(await createDeviceKey())).log).toMatchObject({ reason: code });
  });

  it("apple_risk_exceeded: observed, assertions of a key above the app's limit pass", async () => {
    const code = 'apple_risk_exceeded';
    const device = await createDeviceKey();
    expect((await register(device)).log).toMatchObject({ isValid: true });
    await db.db.execute(sql`update apple_keys set risk_metric = 9`);
    await change({ maxRiskMetric: 3 });
    const enforced = await assert(device, 1);
    expect(enforced.body).toEqual({ isValid: false, statusCode: 0 });
    expect(enforced.log).toMatchObject({ reason: code });

    await change({ observeChange: { observe: [code] } });
    const observed = await assert(device, 2);
    expectValidAnswer(observed.body, code);
    expect(observed.body).toMatchObject({ appleTokenDetails: { riskMetric: 9 } });
    expect(observed.log).toMatchObject({ isValid: true, observed: [code] });

    await change({ observeChange: { enforce: [code] } });
    expect((await assert(device, 3)).log).toMatchObject({ reason: code });
  });

  it('apple_distribution_not_allowed: observed at registration and again at each assertion', async () => {
    const code = 'apple_distribution_not_allowed';
    await change({ validationCategories: ['appstore'] });
    const enforced = await register(await createDeviceKey());
    expect(enforced.log).toMatchObject({ isValid: false, reason: code });

    await change({ observeChange: { observe: [code] } });
    const device = await createDeviceKey();
    const registered = await register(device);
    expectValidAnswer(registered.body, code);
    expect(registered.log).toMatchObject({ isValid: true, observed: [code] });
    const asserted = await assert(device, 1);
    expect(asserted.log).toMatchObject({ isValid: true, observed: [code] });

    await change({ observeChange: { enforce: 'all' } });
    expect((await assert(device, 2)).log).toMatchObject({ isValid: false, reason: code });
  });

  it('apple_platform_not_allowed (--platforms ios): enforced, a Mac key is refused; observed, it registers and asserts as macOS; enforced again, refused', async () => {
    const code = 'apple_platform_not_allowed';
    const mac = {
      leafExtensions: [
        new x509.Extension(APPLE_KEY_ACCESS_CONTROL_OID, false, DEV_KEY_ACCESS_CONTROL),
        new x509.Extension(APPLE_OS_INFO_OID, false, devOsInformation('macosx')),
      ],
    };
    await change({ platforms: ['ios'] });
    const enforced = await register(await createDeviceKey(), mac);
    expect(enforced.body).toEqual({ isValid: false, statusCode: 0 });
    expect(enforced.log).toMatchObject({ reason: code });
    // an iPhone key is not touched by the rule
    expect((await register(await createDeviceKey())).log).toMatchObject({ isValid: true });

    await change({ observeChange: { observe: [code] } });
    const device = await createDeviceKey();
    const registered = await register(device, mac);
    expectValidAnswer(registered.body, code);
    expect(registered.body).toMatchObject({ appleTokenDetails: { platform: 'macOS' } });
    expect(registered.log).toMatchObject({ isValid: true, observed: [code] });
    const asserted = await assert(device, 1);
    expectValidAnswer(asserted.body, code);
    expect(asserted.log).toMatchObject({ isValid: true, observed: [code] });

    await change({ observeChange: { enforce: [code] } });
    const refused = await assert(device, 2);
    expect(refused.body).toEqual({ isValid: false, statusCode: 0 });
    expect(refused.log).toMatchObject({ reason: code });
    expect(refused.log.observed).toBeUndefined();
  });

  it('two observed rules failing in one registration are both recorded, in check order', async () => {
    await change({
      validationCategories: ['appstore'],
      observeChange: {
        observe: ['apple_distribution_not_allowed', 'apple_environment_not_allowed'],
      },
    });
    const { body, log } = await register(await createDeviceKey(), { environment: 'Development' });
    expect(body).toMatchObject({ isValid: true });
    expect(log.observed).toEqual([
      'apple_environment_not_allowed',
      'apple_distribution_not_allowed',
    ]);
  });

  it('observing every code never lets an identity failure through (wrong nonce, replayed counter)', async () => {
    await change({ observeChange: { observe: [...OBSERVABLE_REASONS.apple] } });
    const device = await createDeviceKey();
    const wrongNonce = await send(async (nonce) =>
      encodeAppleToken({
        nonce,
        keyId: device.keyId,
        attestation: (await createAttestation(ca, device, { nonce: Buffer.alloc(32, 1) }))
          .attestation,
      }),
    );
    expect(wrongNonce.log).toMatchObject({ isValid: false, reason: 'apple_nonce_mismatch' });
    expect((await register(device)).log).toMatchObject({ isValid: true });
    expect((await assert(device, 1)).log).toMatchObject({ isValid: true });
    expect((await assert(device, 1)).log).toMatchObject({ reason: 'apple_counter_replay' });
  });
});
