// Every real Android key attestation chain of test/fixtures/android-key gets the verdict
// docs/token-format.md (android-key) gives it, through verifyToken with the built-in Google root
// keys and the shipped status list, at the chain's verifyAt.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { parseKeyDescription } from '../../../src/core/androidKey/keyDescription.js';
import { readAttestationCertificate } from '../../../src/core/androidKey/attestationCertificate.js';
import { shippedRevocations } from '../../../src/core/androidKey/revocationList.js';
import { defaultAndroidRoots } from '../../../src/core/androidKey/trustRoots.js';
import { createMemoryAllowlist } from '../../../src/core/memoryStores.js';
import { createMemoryAndroidKeyStore } from '../../../src/core/memoryStores.js';
import { buildVerifiers } from '../../../src/core/verifiers.js';
import { verifyToken } from '../../../src/core/verify.js';
import type { AndroidPackagePolicy } from '../../../src/core/ports.js';
import {
  lockedAndVerified,
  loadAndroidVectors,
  vectorPackage,
  vectorPolicy,
  vectorToken,
  type AndroidVector,
} from '../../support/androidVectors.js';
import { defaultAppleRoots } from '../../../src/core/apple/trustRoots.js';
import { createMemoryAppleKeyStore } from '../../../src/core/memoryStores.js';

/** The spec's outcome per vector: accepted, or the reason. */
const EXPECTED: Record<string, string> = {
  'google-aka-strongbox-ec-unknown-root': 'android_chain_invalid',
  'google-aka-strongbox-rsa-unknown-root': 'android_chain_invalid',
  'google-aka-tee-ec': 'accept',
  'google-keyattestation-invalid-malformed-devicelocked': 'accept',
  'google-keyattestation-invalid-tags-not-ascending': 'android_chain_invalid',
  'google-keyattestation-pixel3-strongbox-rsa': 'accept',
  'google-keyattestation-pixel3-tee-ec': 'accept',
  'google-keyattestation-pixel8a-strongbox-rsa': 'accept',
  'google-keyattestation-pixel8a-tee-ec': 'accept',
  'google-keyattestation-pixel8a-tee-rsa-id-attestation': 'accept',
  // Google's rules accept them; this service cannot check ML-DSA assertions yet
  'google-keyattestation-pixel9-tee-mldsa-factory': 'android_key_unsupported',
  'google-keyattestation-pixel9-tee-mldsa-rkp': 'android_key_unsupported',
  'google-keyattestation-pixel9a-strongbox-ec-2026-root': 'accept',
  'google-keyattestation-pixel9a-tee-ec-2026-root': 'accept',
  'google-keyattestation-pixel9a-tee-v500-trusted-confirmation': 'accept',
  'google-keyattestation-pixel9a-tee-v500-usage-count': 'accept',
  'google-keyattestation-pixel9pro-strongbox-ec-rkp': 'accept',
  'google-keyattestation-pixel9pro-tee-ec-rkp': 'accept',
  'google-keyattestation-pixelxl-software-ec': 'android_chain_invalid',
  'google-keyattestation-sony-xperia10iii-tee-ec': 'accept',
  'multipaz-emulator-pixel3a-software-keymint300': 'android_chain_invalid',
  'multipaz-pixel7a-tee-rkp': 'accept',
};

/**
 * Two factory chains' verifyAt is their leaf's creation time by the device's clock, a year before
 * the patch level the same key description states (2019-07 and 2019-08): the clock was wrong, and
 * no server could have seen the key before its patch existed. They are verified in their patch
 * month, where the chain verifies as well (a factory chain's issuers may have expired); at their
 * verifyAt they are refused as from the future (a test below).
 */
const DEVICE_CLOCK_BEHIND: Record<string, string> = {
  'google-aka-tee-ec': '2019-07-15T00:00:00Z',
  'google-keyattestation-pixel3-tee-ec': '2019-08-15T00:00:00Z',
};

const instantOf = (v: AndroidVector) => new Date(DEVICE_CLOCK_BEHIND[v.id] ?? v.verifyAt);

async function run(
  v: AndroidVector,
  policy: AndroidPackagePolicy = vectorPolicy(v),
  at: Date = instantOf(v),
) {
  const nonce = randomBytes(32);
  const verifiers = buildVerifiers({
    allowlist: createMemoryAllowlist({ android: [policy] }),
    appleKeys: createMemoryAppleKeyStore(),
    appleRoots: defaultAppleRoots(),
    android: {
      keys: createMemoryAndroidKeyStore(),
      roots: defaultAndroidRoots(),
      revocations: () => shippedRevocations().list,
    },
  });
  return verifyToken(
    {
      token: vectorToken(v, nonce),
      expectedNonce: nonce,
      challenge: Buffer.from(v.challenge.base64, 'base64'),
    },
    { now: () => at, verifiers },
  );
}

const vectors = loadAndroidVectors();

describe('real Android key attestation chains', () => {
  it('are all here, each with an expected outcome that agrees with the vector file', () => {
    expect(vectors.map((v) => v.id).sort()).toEqual(Object.keys(EXPECTED).sort());
    for (const v of vectors) {
      const expected = EXPECTED[v.id]!;
      if (expected === 'android_key_unsupported')
        expect(v.expected.verdictAttestationRules).toBe('accept');
      else
        expect(v.expected.verdictAttestationRules).toBe(
          expected === 'accept' ? 'accept' : 'reject',
        );
    }
  });

  it.each(vectors.map((v) => [v.id, v] as const))('%s', async (id, v) => {
    const outcome = await run(v);
    const expected = EXPECTED[id]!;
    if (expected === 'accept') {
      expect(outcome.ok ? 'accept' : `${outcome.reason}: ${outcome.detail}`).toBe('accept');
      if (!outcome.ok || outcome.details.service !== 'android-key') return;
      const d = outcome.details.androidKeyDetails;
      const kd = v.keyDescription;
      expect(d.packageName).toBe(vectorPackage(v));
      expect(d.attestationVersion).toBe(kd.attestationVersion);
      expect(d.securityLevel).toBe(kd.attestationSecurityLevel);
      expect(d.deviceLocked).toBe(kd.hardwareEnforced.rootOfTrust!.deviceLocked);
      expect(d.verifiedBootState).toBe(kd.hardwareEnforced.rootOfTrust!.verifiedBootState);
      expect(d.osPatchLevel).toBe(kd.hardwareEnforced.osPatchLevel ?? null);
      // the version 500 tags and the provisioning information, as the independent decoding says
      const either = { ...kd.softwareEnforced, ...kd.hardwareEnforced };
      expect(d.usageCountLimit).toBe(either.usageCountLimit);
      expect(d.trustedConfirmationRequired).toBe(either.trustedConfirmationRequired);
      expect(d.mlDsaVariant).toBe(either.mlDsaVariant);
      expect(d.moduleHash && Buffer.from(d.moduleHash, 'base64').toString('hex')).toBe(
        either.moduleHash,
      );
      expect(d.unknownTags).toBeUndefined();
      const info = v.provisioningInfo?.[0]?.decoded;
      expect(d.provisioningInfo?.entries).toEqual(info);
      expect(d.provisioningInfo?.certificatesIssued).toBe(info?.['1']);
    } else {
      expect(outcome.ok ? 'accept' : outcome.reason).toBe(expected);
    }
  });

  it.each(
    vectors
      .filter((v) => !lockedAndVerified(v) && EXPECTED[v.id] === 'accept')
      .map((v) => [v.id, v] as const),
  )('%s: an unlocked test device, refused without --allow-unlocked', async (_id, v) => {
    const outcome = await run(v, { ...vectorPolicy(v), allowUnlocked: false });
    expect(outcome.ok ? 'accept' : outcome.reason).toBe('android_boot_state_insufficient');
  });

  it.each(vectors.map((v) => [v.id, v] as const))(
    '%s: the KeyDescription decodes to the independent decoding',
    (_id, v) => {
      const leaf = readAttestationCertificate(Buffer.from(v.chain[0]!, 'base64'), 'leaf');
      const [value] = leaf.extensions.get('1.3.6.1.4.1.11129.2.1.17')!;
      const kd = parseKeyDescription(value!);
      expect(kd.attestationVersion).toBe(v.keyDescription.attestationVersion);
      expect(Buffer.from(kd.attestationChallenge).toString('base64')).toBe(v.challenge.base64);
      expect(kd.osPatchLevel).toBe(v.keyDescription.hardwareEnforced.osPatchLevel ?? null);
      expect(kd.rootOfTrust?.deviceLocked).toBe(
        v.keyDescription.hardwareEnforced.rootOfTrust?.deviceLocked,
      );
    },
  );

  it.each(Object.keys(DEVICE_CLOCK_BEHIND))(
    '%s: at its leaf creation time, a year before its patch level, it is from the future',
    async (id) => {
      const v = vectors.find((x) => x.id === id)!;
      const outcome = await run(v, vectorPolicy(v), new Date(v.verifyAt));
      expect(outcome.ok ? 'accept' : outcome.reason).toBe('android_patch_level_future');
    },
  );

  it('a patch level two months ahead passes (a Pixel 9 Pro on a preview build), three do not', async () => {
    const v = vectors.find((x) => x.id === 'google-keyattestation-pixel9pro-tee-ec-rkp')!;
    // 2025-09-26 with osPatchLevel 2025-11: two calendar months ahead
    expect((await run(v)).ok).toBe(true);
    // the same chain a month earlier is refused by its validity first: the check alone
    const { futurePatchLevels } = await import('../../../src/core/androidKey/patchLevels.js');
    const levels = { osPatchLevel: 202511, vendorPatchLevel: 20251105, bootPatchLevel: null };
    expect(futurePatchLevels(levels, new Date('2025-09-30T23:59:59Z'))).toEqual([]);
    expect(futurePatchLevels(levels, new Date('2025-08-31T23:59:59Z'))).toEqual([
      'osPatchLevel 202511',
      'vendorPatchLevel 20251105',
    ]);
  });

  it('every accepted chain passes the StrongBox subject cross-check with the level it claims', async () => {
    for (const v of vectors.filter((x) => EXPECTED[x.id] === 'accept')) {
      const outcome = await run(v);
      const claimed = outcome.checks.find((c) => c.id === 'android.levelClaim');
      expect(claimed?.status, v.id).toBe('pass');
      if (v.keyDescription.attestationSecurityLevel === 'StrongBox')
        expect(claimed?.detail, v.id).toMatch(/claim StrongBox/);
    }
  });

  it('a factory chain keeps verifying after its issuing certificates expired (the 2016 root)', async () => {
    const sony = vectors.find((v) => v.id === 'google-keyattestation-sony-xperia10iii-tee-ec')!;
    const outcome = await run(sony, vectorPolicy(sony), new Date('2026-11-25T00:00:00Z'));
    expect(outcome.ok ? 'accept' : outcome.detail).toBe('accept');
  });

  it('a remotely provisioned chain is refused once an issuing certificate expired', async () => {
    const rkp = vectors.find((v) => v.id === 'google-keyattestation-pixel9pro-tee-ec-rkp')!;
    const outcome = await run(rkp, vectorPolicy(rkp), new Date('2027-06-01T00:00:00Z'));
    expect(outcome.ok ? 'accept' : outcome.reason).toBe('android_chain_invalid');
    expect(outcome.ok ? '' : outcome.detail).toMatch(/remotely provisioned/);
  });

  it('a chain whose leaf carries no key description is malformed', async () => {
    const v = vectors.find((x) => x.id === 'google-aka-tee-ec')!;
    // the intermediate as the leaf: no key description, chain otherwise fine
    const outcome = await run({ ...v, chain: v.chain.slice(1) });
    expect(outcome.ok ? 'accept' : outcome.reason).toBe('android_key_malformed');
  });
});
