// App Attest on macOS: the OS name Apple signs into the leaf (1.2.840.113635.100.8.7) names a Mac
// key (an access-control blob alone does not: Apple's iOS 27 sample carries one too); the app
// entry's --platforms rule refuses (or observes) the other platform, on attestations and on
// assertions (which report the platform stored at registration).
import * as x509 from '@peculiar/x509';
import { beforeAll, describe, expect, it } from 'vitest';
import { createAppleVerifier } from '../../../src/core/apple/appleVerifier.js';
import { MAX_KEY_ACCESS_CONTROL_BYTES } from '../../../src/core/apple/keyPlatform.js';
import {
  APPLE_KEY_ACCESS_CONTROL_OID,
  APPLE_OS_INFO_OID,
} from '../../../src/core/apple/nonceExtension.js';
import { DEV_KEY_ACCESS_CONTROL, devOsInformation } from '../../../src/core/dev/devCa.js';
import {
  createMemoryAllowlist,
  createMemoryAppleKeyStore,
} from '../../../src/core/memoryStores.js';
import type { AppleAppPolicy } from '../../../src/core/ports.js';
import type { VerifyOutcome } from '../../../src/core/outcome.js';
import { verifyToken } from '../../../src/core/verify.js';
import {
  createAssertion,
  createAttestation,
  createDeviceKey,
  createTestCa,
  encodeAppleToken,
  TEST_APP_ID,
  TEST_NONCE,
  TEST_NOW,
  type DeviceKey,
  type TestCa,
} from '../../support/appleFactory.js';

let ca: TestCa;
beforeAll(async () => {
  ca = await createTestCa();
});

const acl = (value: Uint8Array = DEV_KEY_ACCESS_CONTROL) =>
  new x509.Extension(APPLE_KEY_ACCESS_CONTROL_OID, false, value);
const os = (name: string) => new x509.Extension(APPLE_OS_INFO_OID, false, devOsInformation(name));
/** what a Mac key's leaf carries: the access-control blob and the OS name `macosx` */
const macLeaf = (blob = acl()) => [blob, os('macosx')];

function service(policy: Partial<AppleAppPolicy> = {}) {
  const apps: AppleAppPolicy[] = [{ appId: TEST_APP_ID, env: 'production', ...policy }];
  const keys = createMemoryAppleKeyStore();
  const allowlist = {
    ...createMemoryAllowlist({}),
    appleApps: async () => apps,
    appleApp: async (id: string) => apps.find((a) => a.appId === id) ?? null,
  };
  const verifier = createAppleVerifier({ roots: ca.roots, allowlist, keys });
  const verify = (token: Uint8Array) =>
    verifyToken(
      { token, expectedNonce: TEST_NONCE },
      { now: () => TEST_NOW, verifiers: { apple: verifier } },
    );
  return { verify, keys, apps };
}

const reason = (o: VerifyOutcome) => (o.ok ? 'accepted' : o.reason);
const platformOf = (o: VerifyOutcome) =>
  o.ok && o.details.service === 'apple' ? o.details.appleTokenDetails.platform : undefined;

async function registration(device: DeviceKey, leafExtensions: x509.Extension[] = []) {
  const { attestation } = await createAttestation(ca, device, { leafExtensions });
  return encodeAppleToken({ keyId: device.keyId, attestation });
}

describe('App Attest key platform', () => {
  it('the OS name decides: iphoneos or none is iOS, even with an access-control blob; macosx is macOS, stored with the key', async () => {
    const s = service();
    const phone = await createDeviceKey();
    const phone27 = await createDeviceKey();
    const mac = await createDeviceKey();
    expect(platformOf(await s.verify(await registration(phone)))).toBe('iOS');
    // as Apple's iOS 27 sample: the blob and the OS name iphoneos
    expect(platformOf(await s.verify(await registration(phone27, [acl(), os('iphoneos')])))).toBe(
      'iOS',
    );
    expect(platformOf(await s.verify(await registration(await createDeviceKey(), [acl()])))).toBe(
      'iOS',
    );
    const outcome = await s.verify(await registration(mac, macLeaf()));
    expect(platformOf(outcome)).toBe('macOS');
    expect(outcome.checks.find((c) => c.id === 'apple.attestation.platform')?.detail).toMatch(
      /macOS key .*75 bytes/,
    );
    expect((await s.keys.find(mac.keyId))?.platform).toBe('macOS');
    // an assertion reports the platform stored at registration
    const asserted = await s.verify(
      encodeAppleToken({
        keyId: mac.keyId,
        assertion: createAssertion(mac, { counter: 1 }).assertion,
      }),
    );
    expect(reason(asserted)).toBe('accepted');
    expect(platformOf(asserted)).toBe('macOS');
  });

  it('--platforms ios refuses a Mac key at registration (apple_platform_not_allowed), macos an iPhone one', async () => {
    const mac = await createDeviceKey();
    const refused = await service({ platforms: ['ios'] }).verify(
      await registration(mac, macLeaf()),
    );
    expect(reason(refused)).toBe('apple_platform_not_allowed');
    expect(refused.checks.find((c) => c.id === 'apple.attestation.platform')?.status).toBe('fail');
    const phone = await createDeviceKey();
    expect(reason(await service({ platforms: ['macos'] }).verify(await registration(phone)))).toBe(
      'apple_platform_not_allowed',
    );
    const both = await createDeviceKey();
    expect(
      reason(
        await service({ platforms: ['ios', 'macos'] }).verify(await registration(both, macLeaf())),
      ),
    ).toBe('accepted');
  });

  it('the rule can be observed: the key registers and the failure is recorded', async () => {
    const mac = await createDeviceKey();
    const s = service({ platforms: ['ios'], observe: ['apple_platform_not_allowed'] });
    const outcome = await s.verify(await registration(mac, macLeaf()));
    expect(reason(outcome)).toBe('accepted');
    expect(outcome.checks.find((c) => c.id === 'apple.attestation.platform')?.status).toBe(
      'observed',
    );
  });

  it("a stricter entry applies to keys registered before: the assertion's platform is checked", async () => {
    const mac = await createDeviceKey();
    const s = service();
    expect(reason(await s.verify(await registration(mac, macLeaf())))).toBe('accepted');
    s.apps[0] = { ...s.apps[0]!, platforms: ['ios'] };
    const outcome = await s.verify(
      encodeAppleToken({
        keyId: mac.keyId,
        assertion: createAssertion(mac, { counter: 1 }).assertion,
      }),
    );
    expect(reason(outcome)).toBe('apple_platform_not_allowed');
    expect(outcome.checks.find((c) => c.id === 'apple.assertion.policy')?.status).toBe('fail');
  });

  it.each([
    ['twice', [acl(), acl()]],
    ['empty', [acl(new Uint8Array())]],
    ['oversized', [acl(new Uint8Array(MAX_KEY_ACCESS_CONTROL_BYTES + 1).fill(0x30))]],
  ] as const)('a %s key access-control extension is malformed, never a fault', async (_n, exts) => {
    const mac = await createDeviceKey();
    const outcome = await service().verify(await registration(mac, [...exts]));
    expect(reason(outcome)).toBe('apple_attestation_malformed');
    expect(outcome.ok ? '' : outcome.detail).toMatch(/access-control/);
  });

  it('a blob of exactly the bound passes', async () => {
    const mac = await createDeviceKey();
    const big = acl(new Uint8Array(MAX_KEY_ACCESS_CONTROL_BYTES).fill(0x30));
    expect(platformOf(await service().verify(await registration(mac, macLeaf(big))))).toBe('macOS');
  });
});
