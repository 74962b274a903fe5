// Per-device velocity end to end (--max-verifies-per-device): HTTP app + real verifiers + the
// device_velocity table, on PGlite and PostgreSQL, with an injected clock.
import { randomBytes } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { defaultAppleRoots } from '../../src/core/apple/trustRoots.js';
import type { DeviceLimit } from '../../src/core/ports.js';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import type { AuditEvent, Auditor } from '../../src/db/audit.js';
import { openDatabase } from '../../src/db/client.js';
import { rowsOf, type DatabaseHandle } from '../../src/db/database.js';
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
  type DeviceKey,
  type TestCa,
} from '../support/appleFactory.js';
import { encodeEnvelope } from '../../src/core/envelope.js';
import { backends, useDatabase } from '../support/databases.js';
import {
  createGoogleTestKeys,
  keyPairOf,
  mintIntegrityToken,
  TEST_PACKAGE,
  type GoogleTestKeys,
} from '../support/googleFactory.js';
import { createPlatformService, issueKey, verifySessionless } from '../support/service.js';
import { TEST_SECRETS } from '../support/secrets.js';

const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');
const HOUR = 3600;

let appleCa: TestCa;
let androidCa: AndroidTestCa;
let googleKeys: GoogleTestKeys;
beforeAll(async () => {
  [appleCa, androidCa, googleKeys] = await Promise.all([
    createTestCa(),
    createAndroidTestCa(),
    createGoogleTestKeys('velocity'),
  ]);
});

type Service = ReturnType<typeof createPlatformService>;

/** One verify: isValid and the reason the request log gives. */
async function run(
  service: Service,
  key: string,
  build: (nonce: Buffer) => Promise<Uint8Array> | Uint8Array,
) {
  const res = await verifySessionless(service.app, key, build);
  expect(res.status).toBe(200);
  const body = (await res.json()) as { isValid: boolean };
  return { valid: body.isValid, body, reason: service.logs.last().reason as string | undefined };
}

describe.each(backends())('per-device velocity on $name', (backend) => {
  const db = useDatabase(backend);
  let key: string;
  let clock: Date;
  let service: Service;
  const events: AuditEvent[] = [];
  const auditor: Auditor = { actor: 'alice@ops', log: (e) => events.push(e) };
  const allowlist = () => createAllowlistRepository(db.db, TEST_SECRETS);

  beforeEach(async () => {
    events.length = 0;
    key = (await issueKey(db)).key;
    clock = new Date(TEST_NOW);
    service = serviceOn(db);
  });

  const serviceOn = (handle: DatabaseHandle) =>
    createPlatformService(handle, {
      now: () => clock,
      appleRoots: appleCa.roots,
      androidRoots: androidCa.roots,
    });

  const limitApple = (limit: DeviceLimit | null) =>
    allowlist().addApple(TEST_APP_ID, 'production', auditor, { maxVerifiesPerDevice: limit });
  const limitAndroid = (limit: DeviceLimit | null) =>
    allowlist().addAndroid(
      ANDROID_PACKAGE,
      null,
      { keyAttestation: true, maxVerifiesPerDevice: limit },
      auditor,
    );

  describe('App Attest', () => {
    let device: DeviceKey;
    let counter: number;
    const register = () =>
      run(service, key, async (nonce) =>
        encodeAppleToken({
          nonce,
          keyId: device.keyId,
          attestation: (await createAttestation(appleCa, device, { nonce })).attestation,
        }),
      );
    const assert = () =>
      run(service, key, (nonce) =>
        encodeAppleToken({
          nonce,
          keyId: device.keyId,
          assertion: createAssertion(device, { nonce, counter: ++counter }).assertion,
        }),
      );

    beforeEach(async () => {
      device = await createDeviceKey();
      counter = 0;
    });

    it('counts the registration and each assertion; past N the verify is device_rate_exceeded', async () => {
      await limitApple({ max: 3, periodSeconds: HOUR });
      expect((await register()).valid).toBe(true);
      expect((await assert()).valid).toBe(true);
      expect((await assert()).valid).toBe(true);
      const over = await assert();
      expect(over.body).toEqual({ isValid: false, statusCode: 0 });
      expect(over.reason).toBe('device_rate_exceeded');
      expect(service.logs.last()).toMatchObject({ service: 'apple', keyId: b64(device.keyId) });
      // the rejected assertion still used up its counter: a replay of it is a replay
      expect((await assert()).reason).toBe('device_rate_exceeded');
    });

    it('a replayed assertion is not counted (only valid verifies are)', async () => {
      await limitApple({ max: 2, periodSeconds: HOUR });
      expect((await register()).valid).toBe(true);
      const replay = await run(service, key, (nonce) =>
        encodeAppleToken({
          nonce,
          keyId: device.keyId,
          assertion: createAssertion(device, { nonce, counter: 0 }).assertion,
        }),
      );
      expect(replay.reason).toBe('apple_counter_replay');
      expect((await assert()).valid).toBe(true);
      expect((await assert()).reason).toBe('device_rate_exceeded');
    });

    it('starts again in the next window of the injected clock', async () => {
      await limitApple({ max: 2, periodSeconds: HOUR });
      // TEST_NOW is 12:00:00Z: the window is 12:00 to 13:00
      expect((await register()).valid).toBe(true);
      expect((await assert()).valid).toBe(true);
      clock = new Date(TEST_NOW.getTime() + HOUR * 1000 - 1);
      expect((await assert()).reason).toBe('device_rate_exceeded');
      clock = new Date(TEST_NOW.getTime() + HOUR * 1000);
      expect((await assert()).valid).toBe(true);
      expect((await assert()).valid).toBe(true);
      expect((await assert()).reason).toBe('device_rate_exceeded');
      const [view] = await createDeviceVelocityRepository(db.db).show(device.keyId, clock);
      expect(view).toMatchObject({
        service: 'apple',
        app: TEST_APP_ID,
        environment: 'Production',
        limit: { max: 2, periodSeconds: HOUR },
        window: {
          start: new Date('2026-11-22T13:00:00Z'),
          end: new Date('2026-11-22T14:00:00Z'),
          // the refused verify is not counted: the window holds the two it accepted
          count: 2,
        },
      });
      expect(view!.lastUsedAt!.getTime()).toBeGreaterThanOrEqual(clock.getTime());
      // a later window holds nothing yet
      const later = await createDeviceVelocityRepository(db.db).show(
        device.keyId,
        new Date('2026-11-22T14:00:00Z'),
      );
      expect(later[0]!.window!.count).toBe(0);
    });

    it('--no-max-verifies-per-device stops counting at once; both changes are audited', async () => {
      await limitApple({ max: 1, periodSeconds: 60 });
      expect((await register()).valid).toBe(true);
      expect((await assert()).reason).toBe('device_rate_exceeded');
      const { result, policy } = await limitApple(null);
      expect(result).toBe('updated');
      expect(policy.maxVerifiesPerDevice).toBeNull();
      expect((await assert()).valid).toBe(true);
      expect((await assert()).valid).toBe(true);
      expect(
        events.map((e) => [
          e.action,
          e.before?.maxVerifiesPerDevice,
          e.after?.maxVerifiesPerDevice,
        ]),
      ).toEqual([
        ['allowlist.add', undefined, { max: 1, periodSeconds: 60 }],
        ['allowlist.update', { max: 1, periodSeconds: 60 }, null],
      ]);
      // absent keeps the stored limit: no change, no event
      await limitApple({ max: 5, periodSeconds: 86_400 });
      await allowlist().addApple(TEST_APP_ID, undefined, auditor, { requireReceipt: false });
      expect((await allowlist().listApple())[0]!.maxVerifiesPerDevice).toEqual({
        max: 5,
        periodSeconds: 86_400,
      });
      expect(events).toHaveLength(3);
    });

    it('observed (--observe device_rate_exceeded): past N the verify stays valid, the log names the rule, the count stays at N', async () => {
      await allowlist().addApple(TEST_APP_ID, 'production', auditor, {
        maxVerifiesPerDevice: { max: 1, periodSeconds: HOUR },
        observeChange: { observe: ['device_rate_exceeded'] },
      });
      expect((await register()).valid).toBe(true);
      expect(service.logs.last().observed).toBeUndefined();
      const observed = await assert();
      expect(observed.valid).toBe(true);
      expect(observed.body).toMatchObject({ appleTokenDetails: { assertionCounter: 1 } });
      expect(service.logs.last()).toMatchObject({
        isValid: true,
        observed: ['device_rate_exceeded'],
      });
      await allowlist().addApple(TEST_APP_ID, undefined, auditor, {
        observeChange: { enforce: 'all' },
      });
      // enforced again, the device is at its limit; nothing past N is ever counted
      expect((await assert()).reason).toBe('device_rate_exceeded');
      const [view] = await createDeviceVelocityRepository(db.db).show(device.keyId, clock);
      expect(view!.window!.count).toBe(1);
    });

    it('without a limit nothing is counted (no row, no statement)', async () => {
      await allowlist().addApple(TEST_APP_ID, 'production');
      expect((await register()).valid).toBe(true);
      for (let i = 0; i < 3; i++) expect((await assert()).valid).toBe(true);
      const rows = rowsOf(await db.db.execute(sql`select * from device_velocity`));
      expect(rows).toHaveLength(0);
      const [view] = await createDeviceVelocityRepository(db.db).show(device.keyId, clock);
      expect(view).toMatchObject({ limit: null, window: null, service: 'apple' });
    });
  });

  describe('android-key', () => {
    it('counts the registration and each signature; past N device_rate_exceeded, then the next window', async () => {
      await limitAndroid({ max: 2, periodSeconds: 60 });
      clock = new Date(ANDROID_NOW);
      const nonce = randomBytes(32);
      const made = await androidRegistration(androidCa, { nonce });
      const ok = await verifySessionless(service.app, key, () => made.token, nonce);
      expect(((await ok.json()) as { isValid: boolean }).isValid).toBe(true);
      const sign = () => run(service, key, (n) => androidAssertion(made.device, n));
      expect((await sign()).valid).toBe(true);
      const over = await sign();
      expect(over.reason).toBe('device_rate_exceeded');
      expect(service.logs.last()).toMatchObject({
        service: 'android-key',
        keyId: b64(made.device.keyId),
      });
      clock = new Date(ANDROID_NOW.getTime() + 60_000);
      expect((await sign()).valid).toBe(true);
      const [view] = await createDeviceVelocityRepository(db.db).show(made.device.keyId, clock);
      expect(view).toMatchObject({
        service: 'android-key',
        app: ANDROID_PACKAGE,
        environment: null,
        mode: 'live',
        lastUsedAt: clock,
        window: { count: 1 },
      });
    });

    it('observed on a package: past N an android-key signature stays valid', async () => {
      await allowlist().addAndroid(
        ANDROID_PACKAGE,
        null,
        {
          keyAttestation: true,
          maxVerifiesPerDevice: { max: 1, periodSeconds: 60 },
          observeChange: { observe: ['device_rate_exceeded'] },
        },
        auditor,
      );
      clock = new Date(ANDROID_NOW);
      const nonce = randomBytes(32);
      const made = await androidRegistration(androidCa, { nonce });
      await verifySessionless(service.app, key, () => made.token, nonce);
      const signed = await run(service, key, (n) => androidAssertion(made.device, n));
      expect(signed.valid).toBe(true);
      expect(service.logs.last()).toMatchObject({ observed: ['device_rate_exceeded'] });
    });

    it('50 parallel verifies over two instances under a limit of 10: exactly 10 are valid', async () => {
      await limitAndroid(null);
      clock = new Date(ANDROID_NOW);
      const nonce = randomBytes(32);
      const made = await androidRegistration(androidCa, { nonce });
      const ok = await verifySessionless(service.app, key, () => made.token, nonce);
      expect(((await ok.json()) as { isValid: boolean }).isValid).toBe(true);
      await limitAndroid({ max: 10, periodSeconds: HOUR });
      // a second instance: its own pool on PostgreSQL, the one embedded database on PGlite
      const second = db.url
        ? await openDatabase({ url: db.url, dataDir: '', role: 'server', poolSize: 10 })
        : null;
      try {
        const other = serviceOn(second ?? db);
        const results = await Promise.all(
          Array.from({ length: 50 }, async (_, i) => {
            const res = await verifySessionless((i % 2 ? other : service).app, key, (n) =>
              androidAssertion(made.device, n),
            );
            return ((await res.json()) as { isValid: boolean }).isValid;
          }),
        );
        expect(results.filter(Boolean)).toHaveLength(10);
        const reasons = [...service.logs.requests(), ...other.logs.requests()]
          .filter((l) => l.isValid === false)
          .map((l) => l.reason);
        expect(reasons).toHaveLength(40);
        expect(new Set(reasons)).toEqual(new Set(['device_rate_exceeded']));
      } finally {
        await second?.close();
      }
    });
  });

  it('the count is one atomic statement: 50 parallel counts on two connections are 1 to 50', async () => {
    const second = db.url
      ? await openDatabase({ url: db.url, dataDir: '', role: 'server', poolSize: 10 })
      : null;
    try {
      const stores = [
        createDeviceVelocityRepository(db.db),
        createDeviceVelocityRepository((second ?? db).db),
      ];
      const keyId = randomBytes(32);
      const windowStart = new Date('2026-11-22T12:00:00Z');
      const counts = await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          stores[i % 2]!.count({
            keyId,
            service: 'android-key',
            windowStart,
            periodSeconds: HOUR,
            at: new Date(windowStart.getTime() + i),
          }),
        ),
      );
      expect((counts as number[]).sort((a, b) => a - b)).toEqual(
        Array.from({ length: 50 }, (_, i) => i + 1),
      );
      // the same key id of the other service is another device
      expect(
        await stores[0]!.count({
          keyId,
          service: 'apple',
          windowStart,
          periodSeconds: HOUR,
          at: windowStart,
        }),
      ).toBe(1);
      // an instance whose clock is still in the previous window counts into the newer one
      expect(
        await stores[1]!.count({
          keyId,
          service: 'android-key',
          windowStart: new Date(windowStart.getTime() - HOUR * 1000),
          periodSeconds: HOUR,
          at: windowStart,
        }),
      ).toBe(51);
      // another period starts again
      expect(
        await stores[0]!.count({
          keyId,
          service: 'android-key',
          windowStart,
          periodSeconds: 60,
          at: windowStart,
        }),
      ).toBe(1);
    } finally {
      await second?.close();
    }
  });

  it('Play Integrity tokens are never counted, whatever the package limit', async () => {
    await allowlist().addAndroid(
      TEST_PACKAGE,
      keyPairOf(googleKeys),
      { keyAttestation: true, maxVerifiesPerDevice: { max: 1, periodSeconds: HOUR } },
      auditor,
    );
    for (let i = 0; i < 3; i++) {
      const result = await run(service, key, async (nonce) =>
        encodeEnvelope({
          nonce,
          service: 'gms',
          evidence: new Map<string, unknown>([
            ['packageName', TEST_PACKAGE],
            [
              'integrityToken',
              await mintIntegrityToken({
                keys: googleKeys,
                nonce,
                now: new Date(clock.getTime() - 20_000),
              }),
            ],
          ]),
        }),
      );
      expect(result.valid).toBe(true);
    }
    expect(rowsOf(await db.db.execute(sql`select * from device_velocity`))).toHaveLength(0);
  });

  it('shows the limit in the allowlist listing and the audit trail of a package', async () => {
    await limitAndroid({ max: 1000, periodSeconds: 86_400 });
    expect((await allowlist().listAndroid())[0]!.maxVerifiesPerDevice).toEqual({
      max: 1000,
      periodSeconds: 86_400,
    });
    await limitAndroid(null);
    expect((await allowlist().listAndroid())[0]!.maxVerifiesPerDevice).toBeNull();
    expect(events.map((e) => [e.action, e.after?.maxVerifiesPerDevice])).toEqual([
      ['allowlist.add', { max: 1000, periodSeconds: 86_400 }],
      ['allowlist.update', null],
    ]);
  });
});
