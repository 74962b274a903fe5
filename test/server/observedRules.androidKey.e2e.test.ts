// Observed rules for Android key attestation end to end: the observe set stored on the package
// row (PGlite and PostgreSQL), minted chains failing each observable rule, the HTTP answer and
// the log line, at registration and at the key's assertions.
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { defaultAppleRoots } from '../../src/core/apple/trustRoots.js';
import type { KeyDescriptionFields } from '../../src/core/dev/androidKeyMint.js';
import { OBSERVABLE_REASONS } from '../../src/core/observedRules.js';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import type { AndroidPolicyInput } from '../../src/db/androidPackageRows.js';
import {
  ANDROID_NOW,
  ANDROID_PACKAGE,
  androidAssertion,
  androidRegistration,
  createAndroidTestCa,
  type AndroidTestCa,
} from '../support/androidFactory.js';
import { backends, useDatabase } from '../support/databases.js';
import { createPlatformService, issueKey, verifySessionless } from '../support/service.js';
import { TEST_SECRETS } from '../support/secrets.js';

type Body = Record<string, unknown>;
type Description = Partial<KeyDescriptionFields>;
type Device = Awaited<ReturnType<typeof androidRegistration>>['device'];

/** Each observable android-key rule: a policy that sets it and a key description that fails it. */
const CASES: { code: string; policy: AndroidPolicyInput; description: Description }[] = [
  {
    code: 'android_security_level_insufficient',
    policy: { minSecurityLevel: 'StrongBox' },
    description: {},
  },
  {
    code: 'android_boot_state_insufficient',
    policy: {},
    description: { rootOfTrust: { deviceLocked: false, verifiedBootState: 'Unverified' } },
  },
  {
    code: 'android_patch_level_stale',
    policy: { maxPatchAgeMonths: 6 },
    description: { osPatchLevel: 202401 },
  },
];

let ca: AndroidTestCa;
beforeAll(async () => {
  ca = await createAndroidTestCa();
});

describe.each(backends())('observed android-key rules on $name', (backend) => {
  const db = useDatabase(backend);
  let key: string;
  let service: ReturnType<typeof createPlatformService>;
  const change = (policy: AndroidPolicyInput) =>
    createAllowlistRepository(db.db, TEST_SECRETS).addAndroid(ANDROID_PACKAGE, null, policy);

  beforeEach(async () => {
    key = (await issueKey(db)).key;
    await change({ keyAttestation: true });
    service = createPlatformService(db, {
      now: ANDROID_NOW,
      appleRoots: defaultAppleRoots(),
      androidRoots: ca.roots,
    });
  });

  async function send(build: (nonce: Buffer) => Promise<Uint8Array> | Uint8Array) {
    const res = await verifySessionless(service.app, key, build);
    expect(res.status).toBe(200);
    return { body: (await res.json()) as Body, log: service.logs.last() };
  }
  async function register(description: Description) {
    let device: Device | undefined;
    const sent = await send(async (nonce) => {
      const made = await androidRegistration(ca, { nonce, description });
      device = made.device;
      return made.token;
    });
    return { ...sent, device: device! };
  }
  const assert = (device: Device) => send((nonce) => androidAssertion(device, nonce));

  it('the cases cover every observable android-key code', () => {
    // device_rate_exceeded needs verifies past a limit, not one token: deviceVelocity.e2e.test.ts;
    // android_issuer_overused registrations past one: test/db/keyboxDefence.test.ts
    expect(CASES.map((c) => c.code)).toEqual(
      OBSERVABLE_REASONS['android-key'].filter(
        (c) => c !== 'device_rate_exceeded' && c !== 'android_issuer_overused',
      ),
    );
  });

  it.each(CASES)(
    '$code: enforced it rejects; observed the key registers and asserts, logged but not answered; enforced again its assertions are refused',
    async ({ code, policy, description }) => {
      await change(policy);
      const enforced = await register(description);
      expect(enforced.body).toEqual({ isValid: false, statusCode: 0 });
      expect(enforced.log).toMatchObject({ isValid: false, reason: code });

      await change({ observeChange: { observe: [code] } });
      const registered = await register(description);
      expect(registered.body).toMatchObject({
        isValid: true,
        statusCode: 0,
        androidKeyDetails: { packageName: ANDROID_PACKAGE },
      });
      expect(Object.keys(registered.body).sort()).toEqual([
        'androidKeyDetails',
        'isValid',
        'statusCode',
      ]);
      expect(JSON.stringify(registered.body)).not.toContain(code);
      expect(registered.log).toMatchObject({ isValid: true, observed: [code] });

      const asserted = await assert(registered.device);
      expect(asserted.log).toMatchObject({ isValid: true, observed: [code] });

      await change({ observeChange: { enforce: 'all' } });
      expect((await assert(registered.device)).log).toMatchObject({ isValid: false, reason: code });
    },
  );

  it('two observed rules failing in one registration are both recorded, in check order', async () => {
    await change({
      minSecurityLevel: 'StrongBox',
      maxPatchAgeMonths: 6,
      observeChange: {
        observe: ['android_patch_level_stale', 'android_security_level_insufficient'],
      },
    });
    const { body, log } = await register({ osPatchLevel: 202401 });
    expect(body).toMatchObject({ isValid: true });
    expect(log.observed).toEqual([
      'android_security_level_insufficient',
      'android_patch_level_stale',
    ]);
  });

  it('a software-attested key is refused even when the security level is observed', async () => {
    await change({ observeChange: { observe: [...OBSERVABLE_REASONS['android-key']] } });
    const { body, log } = await register({
      attestationSecurityLevel: 'Software',
      keyMintSecurityLevel: 'Software',
    });
    expect(body).toEqual({ isValid: false, statusCode: 0 });
    expect(log).toMatchObject({ reason: 'android_security_level_insufficient' });
    expect(log.observed).toBeUndefined();
  });

  it('observing every code never lets an identity failure through (challenge, app signature)', async () => {
    await change({
      certificateDigests: [new Uint8Array(32).fill(9)],
      observeChange: { observe: [...OBSERVABLE_REASONS['android-key']] },
    });
    const otherSigner = await register({});
    expect(otherSigner.log).toMatchObject({ reason: 'android_app_signature_mismatch' });
    const wrongChallenge = await register({ challenge: new Uint8Array(32) });
    expect(wrongChallenge.log).toMatchObject({ reason: 'android_challenge_mismatch' });
  });
});
