// App Attest on macOS and Android key attestation's 2026 checks over HTTP, on PGlite and
// PostgreSQL: the platform and the key extras are stored with the key and reported by assertions;
// --platforms and the StrongBox subject cross-check refuse with their reasons.
import { randomBytes } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  APPLE_KEY_ACCESS_CONTROL_OID,
  APPLE_OS_INFO_OID,
} from '../../src/core/apple/nonceExtension.js';
import { defaultAppleRoots } from '../../src/core/apple/trustRoots.js';
import { DEV_KEY_ACCESS_CONTROL, devOsInformation } from '../../src/core/dev/devCa.js';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import { createAndroidKeyRepository } from '../../src/db/androidKeys.js';
import { createAppleKeyRepository } from '../../src/db/appleKeys.js';
import type { DatabaseHandle } from '../../src/db/database.js';
import {
  ANDROID_NOW,
  ANDROID_PACKAGE,
  androidAssertion,
  androidRegistration,
  createAndroidTestCa,
  FACTORY_STRONGBOX_SUBJECT,
  FACTORY_TEE_SUBJECT,
  type AndroidTestCa,
} from '../support/androidFactory.js';
import {
  createAssertion,
  createAttestation,
  createDeviceKey,
  createTestCa,
  encodeAppleToken,
  sha256,
  TEST_APP_ID,
  TEST_NOW,
  type TestCa,
} from '../support/appleFactory.js';
import { backends, useDatabase } from '../support/databases.js';
import { TEST_SECRETS } from '../support/secrets.js';
import { createPlatformService, issueKey, verifySessionless } from '../support/service.js';

let apple: TestCa;
let android: AndroidTestCa;
beforeAll(async () => {
  [apple, android] = await Promise.all([createTestCa(), createAndroidTestCa()]);
});

type Body = {
  isValid: boolean;
  appleTokenDetails?: Record<string, unknown>;
  androidKeyDetails?: Record<string, unknown>;
};

describe.each(backends())('platforms and key extras over HTTP on $name', (backend) => {
  const db = useDatabase(backend);
  let key: string;

  beforeEach(async () => {
    key = (await issueKey(db)).key;
  });

  const appleService = (handle: DatabaseHandle) =>
    createPlatformService(handle, { now: TEST_NOW, appleRoots: apple.roots });

  it('a Mac key registers as macOS, its assertion reports it, and --platforms ios refuses it', async () => {
    const allowlist = createAllowlistRepository(db.db, TEST_SECRETS);
    await allowlist.addApple(TEST_APP_ID, 'production');
    const service = appleService(db);
    const device = await createDeviceKey();
    const register = await verifySessionless(service.app, key, async (nonce) => {
      const { attestation } = await createAttestation(apple, device, {
        clientDataHash: sha256(nonce),
        leafExtensions: [
          new x509.Extension(APPLE_KEY_ACCESS_CONTROL_OID, false, DEV_KEY_ACCESS_CONTROL),
          new x509.Extension(APPLE_OS_INFO_OID, false, devOsInformation('macosx')),
        ],
      });
      return encodeAppleToken({ keyId: device.keyId, attestation, nonce });
    });
    const registered = (await register.json()) as Body;
    expect(registered.isValid).toBe(true);
    expect(registered.appleTokenDetails?.platform).toBe('macOS');
    expect((await createAppleKeyRepository(db.db).find(device.keyId))?.platform).toBe('macOS');

    const assertion = (counter: number) => (nonce: Buffer) =>
      encodeAppleToken({
        keyId: device.keyId,
        nonce,
        assertion: createAssertion(device, { counter, clientDataHash: sha256(nonce) }).assertion,
      });
    const asserted = (await (
      await verifySessionless(service.app, key, assertion(1))
    ).json()) as Body;
    expect(asserted.appleTokenDetails?.platform).toBe('macOS');

    await allowlist.addApple(TEST_APP_ID, undefined, undefined, { platforms: ['ios'] });
    const refused = (await (
      await verifySessionless(service.app, key, assertion(2))
    ).json()) as Body;
    expect(refused.isValid).toBe(false);
    expect(service.logs.last().reason).toBe('apple_platform_not_allowed');
  });

  it('android-key: extras kept with the key, and a TEE claiming StrongBox refused', async () => {
    await createAllowlistRepository(db.db, TEST_SECRETS).addAndroid(ANDROID_PACKAGE, null, {
      keyAttestation: true,
    });
    const service = createPlatformService(db, {
      now: ANDROID_NOW,
      appleRoots: defaultAppleRoots(),
      androidRoots: android.roots,
    });
    const moduleHash = randomBytes(32);
    let device: Awaited<ReturnType<typeof androidRegistration>>['device'] | undefined;
    const res = await verifySessionless(service.app, key, async (nonce) => {
      const made = await androidRegistration(android, {
        nonce,
        description: {
          attestationVersion: 500,
          keyMintVersion: 500,
          usageCountLimit: 7,
          trustedConfirmationRequired: true,
          moduleHash,
          unknownTags: [725],
          attestationSecurityLevel: 'StrongBox',
          keyMintSecurityLevel: 'StrongBox',
        },
        attestation: { subject: FACTORY_STRONGBOX_SUBJECT },
      });
      device = made.device;
      return made.token;
    });
    const expected = {
      securityLevel: 'StrongBox',
      attestationVersion: 500,
      usageCountLimit: 7,
      trustedConfirmationRequired: true,
      moduleHash: moduleHash.toString('base64'),
      unknownTags: [725],
    };
    expect(((await res.json()) as Body).androidKeyDetails).toMatchObject(expected);
    expect((await createAndroidKeyRepository(db.db).find(device!.keyId))?.extras).toMatchObject({
      usageCountLimit: 7,
      unknownTags: [725],
    });
    const asserted = await verifySessionless(service.app, key, (nonce) =>
      androidAssertion(device!, nonce),
    );
    expect(((await asserted.json()) as Body).androidKeyDetails).toMatchObject(expected);

    const claimed = await verifySessionless(
      service.app,
      key,
      async (nonce) =>
        (
          await androidRegistration(android, {
            nonce,
            description: {
              attestationSecurityLevel: 'StrongBox',
              keyMintSecurityLevel: 'StrongBox',
            },
            attestation: { subject: FACTORY_TEE_SUBJECT },
          })
        ).token,
    );
    expect(((await claimed.json()) as Body).isValid).toBe(false);
    expect(service.logs.last().reason).toBe('android_security_level_mismatch');
  });
});
