// The checks Google's 2026 reference verifier makes (and its peers'), each tried on a chain
// minted for it: the StrongBox subject cross-check, level agreement, origin, patch levels ahead
// of the clock, subject serials on the status list, the provisioning information, the attestation
// version 500 tags and unknown tags carried as data, and a required hardware root of trust.
import { randomBytes } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import { beforeAll, describe, expect, it } from 'vitest';
import { PROVISIONING_INFO_OID } from '../../../src/core/androidKey/attestationChain.js';
import { MAX_UNKNOWN_TAGS } from '../../../src/core/androidKey/keyDescription.js';
import { MAX_PROVISIONING_INFO_BYTES } from '../../../src/core/androidKey/provisioningInfo.js';
import { revocationListOf } from '../../../src/core/androidKey/revocationList.js';
import { defaultAppleRoots } from '../../../src/core/apple/trustRoots.js';
import { encodeCbor } from '../../../src/core/envelope.js';
import {
  createMemoryAllowlist,
  createMemoryAndroidKeyStore,
  createMemoryAppleKeyStore,
} from '../../../src/core/memoryStores.js';
import type { AndroidPackagePolicy, RevocationEntry } from '../../../src/core/ports.js';
import type { VerifyOutcome } from '../../../src/core/outcome.js';
import { buildVerifiers } from '../../../src/core/verifiers.js';
import { verifyToken } from '../../../src/core/verify.js';
import {
  ANDROID_NOW,
  androidAssertion,
  androidKeyPolicy,
  androidRegistration,
  createAndroidTestCa,
  FACTORY_STRONGBOX_SUBJECT,
  FACTORY_TEE_SUBJECT,
  type AndroidTestCa,
  type RegistrationOptions,
} from '../../support/androidFactory.js';

let factory: AndroidTestCa;
let remote: AndroidTestCa;
beforeAll(async () => {
  [factory, remote] = await Promise.all([
    createAndroidTestCa(),
    // Google's remote key provisioning: "CN=Droid CA2, O=Google LLC" just below the root
    createAndroidTestCa({ intermediateSubject: 'CN=Droid CA2, O=Google LLC' }),
  ]);
});

function service(
  ca: AndroidTestCa,
  policy: AndroidPackagePolicy = androidKeyPolicy(),
  revoked = new Map<bigint, RevocationEntry>(),
) {
  const keys = createMemoryAndroidKeyStore();
  const verifiers = buildVerifiers({
    allowlist: createMemoryAllowlist({ android: [policy] }),
    appleKeys: createMemoryAppleKeyStore(),
    appleRoots: defaultAppleRoots(),
    android: { keys, roots: ca.roots, revocations: () => revocationListOf(revoked) },
  });
  const run = (token: Uint8Array, nonce: Uint8Array, at = ANDROID_NOW) =>
    verifyToken({ token, expectedNonce: nonce }, { now: () => at, verifiers });
  return { keys, run };
}

const reason = (o: VerifyOutcome) => (o.ok ? 'accepted' : o.reason);
const details = (o: VerifyOutcome) =>
  o.ok && o.details.service === 'android-key' ? o.details.androidKeyDetails : undefined;

async function register(
  options: Partial<RegistrationOptions> = {},
  ca = factory,
  svc = service(ca),
  at = ANDROID_NOW,
) {
  const nonce = randomBytes(32);
  const made = await androidRegistration(ca, { ...options, nonce });
  return { ...made, outcome: await svc.run(made.token, nonce, at), svc };
}

const STRONGBOX = {
  attestationSecurityLevel: 'StrongBox' as const,
  keyMintSecurityLevel: 'StrongBox' as const,
};

describe('StrongBox subject cross-check (android_security_level_mismatch)', () => {
  it('a factory chain: StrongBox passes under a StrongBox subject, not under a TEE one', async () => {
    const good = await register({
      description: STRONGBOX,
      attestation: { subject: FACTORY_STRONGBOX_SUBJECT },
    });
    expect(reason(good.outcome)).toBe('accepted');
    expect(details(good.outcome)?.securityLevel).toBe('StrongBox');
    // a compromised TEE writing StrongBox into its key descriptions
    const tee = await register({
      description: STRONGBOX,
      attestation: { subject: FACTORY_TEE_SUBJECT },
    });
    expect(reason(tee.outcome)).toBe('android_security_level_mismatch');
    expect(tee.outcome.checks.find((c) => c.id === 'android.levelClaim')?.status).toBe('fail');
    // and with no attestation certificate: the factory intermediate claims nothing
    expect(reason((await register({ description: STRONGBOX })).outcome)).toBe(
      'android_security_level_mismatch',
    );
  });

  it('a TEE key passes under a TEE subject or none, never under a StrongBox one', async () => {
    expect(reason((await register()).outcome)).toBe('accepted');
    expect(
      reason((await register({ attestation: { subject: FACTORY_TEE_SUBJECT } })).outcome),
    ).toBe('accepted');
    // a StrongBox-marked factory subject with a TEE key description: StrongBox claims are exact
    const odd = await register({ attestation: { subject: FACTORY_STRONGBOX_SUBJECT } });
    expect(reason(odd.outcome)).toBe('android_security_level_mismatch');
  });

  it('a remotely provisioned chain: the attestation certificate organization is the level', async () => {
    const ok = await register(
      { description: STRONGBOX, attestation: { subject: 'CN=ab4d584d, O=StrongBox' } },
      remote,
    );
    expect(reason(ok.outcome)).toBe('accepted');
    const tee = await register({ attestation: { subject: 'CN=2c85cdc1, O=TEE' } }, remote);
    expect(reason(tee.outcome)).toBe('accepted');
    const claimed = await register(
      { description: STRONGBOX, attestation: { subject: 'CN=2c85cdc1, O=TEE' } },
      remote,
    );
    expect(reason(claimed.outcome)).toBe('android_security_level_mismatch');
    // an organization that is no level reads as Software: a TEE key under it is refused
    const other = await register({ attestation: { subject: 'CN=2c85cdc1, O=Acme' } }, remote);
    expect(reason(other.outcome)).toBe('android_security_level_mismatch');
  });

  it('the attestation and KeyMint levels must agree', async () => {
    const mixed = await register({
      description: {
        attestationSecurityLevel: 'StrongBox',
        keyMintSecurityLevel: 'TrustedEnvironment',
      },
      attestation: { subject: FACTORY_STRONGBOX_SUBJECT },
    });
    expect(reason(mixed.outcome)).toBe('android_security_level_mismatch');
  });
});

describe('origin (android_key_not_generated)', () => {
  it.each([
    [1, 'DERIVED'],
    [2, 'IMPORTED'],
    [4, 'SECURELY_IMPORTED'],
  ])('origin %i (%s) is refused', async (origin, name) => {
    const { outcome } = await register({ description: { origin } });
    expect(reason(outcome)).toBe('android_key_not_generated');
    expect(outcome.ok ? '' : outcome.detail).toContain(name);
  });
});

describe('patch levels ahead of the clock (android_patch_level_future)', () => {
  it('two calendar months ahead pass, three are refused, for OS, vendor and boot alike', async () => {
    // ANDROID_NOW is 2026-11-22
    expect(reason((await register({ description: { osPatchLevel: 202701 } })).outcome)).toBe(
      'accepted',
    );
    for (const description of [
      { osPatchLevel: 202702 },
      { vendorPatchLevel: 20270205 },
      { bootPatchLevel: 20270201 },
    ]) {
      const { outcome } = await register({ description });
      expect(reason(outcome)).toBe('android_patch_level_future');
      expect(outcome.checks.find((c) => c.id === 'android.patchFuture')?.status).toBe('fail');
    }
  });

  it('is relative to the injected clock, and skips values that are no month', async () => {
    const later = new Date('2027-01-10T00:00:00Z');
    const svc = service(factory);
    expect(
      reason(
        (await register({ description: { osPatchLevel: 202703 } }, factory, svc, later)).outcome,
      ),
    ).toBe('accepted');
    expect(reason((await register({ description: { vendorPatchLevel: 0 } })).outcome)).toBe(
      'accepted',
    );
    expect(reason((await register({ description: { vendorPatchLevel: 20991399 } })).outcome)).toBe(
      'accepted',
    );
  });
});

describe('status list by subject serial (android_chain_revoked)', () => {
  it("an attestation certificate whose subject's serialNumber is revoked", async () => {
    const revoked = new Map([[0x5b0c5b0cn, { status: 'REVOKED', reason: 'KEY_COMPROMISE' }]]);
    const svc = service(factory, androidKeyPolicy(), revoked);
    const { outcome } = await register(
      {
        description: STRONGBOX,
        attestation: { subject: FACTORY_STRONGBOX_SUBJECT, serialNumber: '77' },
      },
      factory,
      svc,
    );
    expect(reason(outcome)).toBe('android_chain_revoked');
    expect(outcome.ok ? '' : outcome.detail).toMatch(/subject serialNumber 5b0c5b0c/);
    expect(outcome.facts.revokedSerial).toBe('5b0c5b0c');
  });
});

describe('provisioning information (1.3.6.1.4.1.11129.2.1.30)', () => {
  const info = (bytes: Uint8Array) => new x509.Extension(PROVISIONING_INFO_OID, false, bytes);

  it('is read from the attestation certificate, shown, and kept with the key', async () => {
    const cbor = encodeCbor(
      new Map<number, unknown>([
        [1, 32],
        [2, true],
        [3, 'Google'],
      ]),
    );
    const { outcome, svc, device } = await register(
      {
        attestation: { subject: 'CN=2c85cdc1, O=TEE', extensions: [info(cbor)] },
      },
      remote,
      service(remote),
    );
    expect(reason(outcome)).toBe('accepted');
    const shown = { certificatesIssued: 32, entries: { '1': 32, '2': true, '3': 'Google' } };
    expect(details(outcome)?.provisioningInfo).toEqual(shown);
    const nonce = randomBytes(32);
    const asserted = await svc.run(androidAssertion(device, nonce), nonce);
    expect(details(asserted)?.provisioningInfo).toEqual(shown);
  });

  it.each([
    ['not CBOR', new Uint8Array([0xff, 0x00])],
    ['not a map', encodeCbor([1, 2])],
    ['a text key', encodeCbor(new Map([['a', 1]]))],
    ['a nested value', encodeCbor(new Map([[1, new Map([[1, 1]])]]))],
    ['a text certificatesIssued', encodeCbor(new Map([[1, 'x']]))],
    ['oversized', new Uint8Array(MAX_PROVISIONING_INFO_BYTES + 1).fill(0x01)],
  ])('%s is refused as malformed, never a fault', async (_name, bytes) => {
    const { outcome } = await register(
      { attestation: { subject: 'CN=2c85cdc1, O=TEE', extensions: [info(bytes)] } },
      remote,
      service(remote),
    );
    expect(reason(outcome)).toBe('android_key_malformed');
    expect(outcome.ok ? '' : outcome.detail).toMatch(/provisioning information/);
  });
});

describe('attestation version 500 tags and unknown tags, carried as data', () => {
  it('tags 11, 405, 508 and 724 are shown, on registration and on assertions', async () => {
    const moduleHash = new Uint8Array(32).fill(0x6a);
    const { outcome, svc, device } = await register({
      description: {
        attestationVersion: 500,
        keyMintVersion: 500,
        mlDsaVariant: 1,
        usageCountLimit: 42,
        trustedConfirmationRequired: true,
        moduleHash,
        unknownTags: [725, 9001],
      },
    });
    const expected = {
      attestationVersion: 500,
      mlDsaVariant: 1,
      usageCountLimit: 42,
      trustedConfirmationRequired: true,
      moduleHash: Buffer.from(moduleHash).toString('base64'),
      unknownTags: [725, 9001],
    };
    expect(details(outcome)).toMatchObject(expected);
    const nonce = randomBytes(32);
    expect(details(await svc.run(androidAssertion(device, nonce), nonce))).toMatchObject(expected);
  });

  it('a later attestation version is carried as given', async () => {
    const { outcome } = await register({
      description: { attestationVersion: 600, keyMintVersion: 600 },
    });
    expect(details(outcome)?.attestationVersion).toBe(600);
    expect(outcome.checks.find((c) => c.id === 'android.certificates')?.detail).toMatch(
      /does not know/,
    );
  });

  it(`more than ${MAX_UNKNOWN_TAGS} unknown tags, or a module hash over 64 bytes, is malformed`, async () => {
    const many = Array.from({ length: MAX_UNKNOWN_TAGS + 1 }, (_, i) => 800 + i);
    expect(reason((await register({ description: { unknownTags: many } })).outcome)).toBe(
      'android_key_malformed',
    );
    expect(
      reason((await register({ description: { moduleHash: new Uint8Array(65) } })).outcome),
    ).toBe('android_key_malformed');
  });
});

describe('hardware root of trust (android_boot_state_insufficient)', () => {
  it('is required even where unlocked devices are allowed', async () => {
    const svc = service(factory, androidKeyPolicy({ allowUnlocked: true }));
    const { outcome } = await register({ description: { rootOfTrust: null } }, factory, svc);
    expect(reason(outcome)).toBe('android_boot_state_insufficient');
    expect(outcome.ok ? '' : outcome.detail).toMatch(/no hardware-enforced rootOfTrust/);
  });

  it('cannot be observed away', async () => {
    const svc = service(
      factory,
      androidKeyPolicy({ allowUnlocked: false, observe: ['android_boot_state_insufficient'] }),
    );
    const { outcome } = await register({ description: { rootOfTrust: null } }, factory, svc);
    expect(reason(outcome)).toBe('android_boot_state_insufficient');
  });
});

describe('issuing certificates not yet valid', () => {
  it('are refused on factory chains too', async () => {
    const early = new Date('2019-06-01T00:00:00Z');
    const { outcome } = await register({}, factory, service(factory), early);
    expect(reason(outcome)).toBe('android_chain_invalid');
    expect(outcome.ok ? '' : outcome.detail).toMatch(/not yet valid/);
  });
});
