// Every registration and assertion rule of android-key (docs/token-format.md), each with a chain
// from a private CA made here that breaks exactly that rule.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { revocationListOf } from '../../../src/core/androidKey/revocationList.js';
import { encodeAndroidKeyToken } from '../../../src/core/androidKey/androidKeyToken.js';
import {
  androidDeviceKeyOf,
  createAndroidDeviceKey,
  signAndroidAssertion,
} from '../../../src/core/dev/androidKeyMint.js';
import {
  createMemoryAllowlist,
  createMemoryAndroidKeyStore,
  createMemoryAppleKeyStore,
} from '../../../src/core/memoryStores.js';
import type { AndroidPackagePolicy, KeyMode, RevocationEntry } from '../../../src/core/ports.js';
import type { VerifyOutcome } from '../../../src/core/outcome.js';
import { buildVerifiers } from '../../../src/core/verifiers.js';
import { verifyToken } from '../../../src/core/verify.js';
import { defaultAppleRoots } from '../../../src/core/apple/trustRoots.js';
import {
  ANDROID_NOW,
  ANDROID_PACKAGE,
  APP_DIGEST,
  androidAssertion,
  androidKeyPolicy,
  androidRegistration,
  createAndroidTestCa,
  FACTORY_STRONGBOX_SUBJECT,
  intermediateWithKeyDescription,
  type AndroidTestCa,
  type RegistrationOptions,
} from '../../support/androidFactory.js';
import { encodeEnvelope } from '../../../src/core/envelope.js';

let ca: AndroidTestCa;
let other: AndroidTestCa;
beforeAll(async () => {
  [ca, other] = await Promise.all([createAndroidTestCa(), createAndroidTestCa()]);
});

function service(
  options: {
    policy?: AndroidPackagePolicy | null;
    revoked?: Map<bigint, RevocationEntry>;
    mode?: KeyMode;
    keys?: ReturnType<typeof createMemoryAndroidKeyStore>;
  } = {},
) {
  const keys = options.keys ?? createMemoryAndroidKeyStore();
  const policies: AndroidPackagePolicy[] =
    options.policy === null ? [] : [options.policy ?? androidKeyPolicy()];
  // read through on every call, so a test can change the entry between requests
  const allowlist = {
    ...createMemoryAllowlist({}),
    androidPackage: async (name: string) => policies.find((p) => p.packageName === name) ?? null,
    androidPackages: async () => policies,
  };
  const list = revocationListOf(options.revoked ?? new Map());
  const verifiers = (mode: KeyMode) =>
    buildVerifiers({
      allowlist,
      appleKeys: createMemoryAppleKeyStore(),
      appleRoots: defaultAppleRoots(),
      mode,
      android: { keys, roots: ca.roots, revocations: () => list },
    });
  const run = (token: Uint8Array, nonce: Uint8Array, at = ANDROID_NOW, mode = options.mode) =>
    verifyToken(
      { token, expectedNonce: nonce },
      { now: () => at, verifiers: verifiers(mode ?? 'live') },
    );
  return { keys, policies, run };
}

const reason = (o: VerifyOutcome) => (o.ok ? 'accepted' : o.reason);

async function register(options: Partial<RegistrationOptions> = {}, svc = service()) {
  const nonce = options.nonce ?? randomBytes(32);
  const made = await androidRegistration(options.issuer ? ca : ca, { ...options, nonce });
  return { ...made, nonce, outcome: await svc.run(made.token, nonce), svc };
}

describe('android-key registration', () => {
  it('accepts a locked, verified TEE key and stores its facts', async () => {
    const svc = service();
    const { outcome, device } = await register({}, svc);
    expect(outcome.ok).toBe(true);
    if (!outcome.ok) return;
    expect(outcome.details).toEqual({
      service: 'android-key',
      androidKeyDetails: {
        keyIdentifier: Buffer.from(device.keyId).toString('base64'),
        packageName: ANDROID_PACKAGE,
        securityLevel: 'TrustedEnvironment',
        verifiedBootState: 'Verified',
        deviceLocked: true,
        osPatchLevel: 202611,
        attestationVersion: 300,
      },
    });
    const stored = [...svc.keys.records.values()][0]!;
    expect(stored.packageName).toBe(ANDROID_PACKAGE);
    expect(Buffer.from(stored.publicKey)).toEqual(Buffer.from(device.spki));
    expect(stored.signatureDigests.map((d) => Buffer.from(d))).toEqual([Buffer.from(APP_DIGEST)]);
    expect(outcome.checks.every((c) => c.status !== 'fail')).toBe(true);
  });

  it('accepts the chain with its root included, and an RSA-2048 key', async () => {
    expect(reason((await register({ includeRoot: true })).outcome)).toBe('accepted');
    const rsa = createAndroidDeviceKey({ rsaBits: 2048 });
    expect(reason((await register({ device: rsa })).outcome)).toBe('accepted');
  });

  describe('1. certificates and key description (android_key_malformed)', () => {
    it.each([
      [
        'a PEM entry',
        (c: Uint8Array[]) => [
          Buffer.from(
            `-----BEGIN CERTIFICATE-----\n${Buffer.from(c[0]!).toString('base64')}\n-----END CERTIFICATE-----\n`,
          ),
          ...c.slice(1),
        ],
      ],
      [
        'bytes after the leaf',
        (c: Uint8Array[]) => [Buffer.concat([c[0]!, Buffer.from([0])]), ...c.slice(1)],
      ],
      [
        'bytes before the leaf',
        (c: Uint8Array[]) => [Buffer.concat([Buffer.from([0]), c[0]!]), ...c.slice(1)],
      ],
      ['a garbage entry', (c: Uint8Array[]) => [c[0]!, Buffer.from('not a certificate')]],
    ])('%s', async (_name, editChain) => {
      expect(reason((await register({ editChain })).outcome)).toBe('android_key_malformed');
    });

    it('a leaf without the extension, or with it twice', async () => {
      expect(reason((await register({ descriptions: 0 })).outcome)).toBe('android_key_malformed');
      expect(reason((await register({ descriptions: 2 })).outcome)).toBe('android_key_malformed');
    });
  });

  describe('2. chain (android_chain_invalid)', () => {
    it('a chain to a root that is not configured', async () => {
      const nonce = randomBytes(32);
      const made = await androidRegistration(other, { nonce });
      expect(reason(await service().run(made.token, nonce))).toBe('android_chain_invalid');
    });

    it('a leaf whose issuer name is not the intermediate subject', async () => {
      const { outcome } = await register({ issuerName: 'CN=Someone Else' });
      expect(reason(outcome)).toBe('android_chain_invalid');
    });

    it('a leaf signed by another key than the intermediate it names', async () => {
      const nonce = randomBytes(32);
      const made = await androidRegistration(other, { nonce, issuerName: ca.intermediate.subject });
      const chain = [made.chain[0]!, ca.intermediate.der];
      const token = encodeAndroidKeyToken({
        nonce,
        packageName: ANDROID_PACKAGE,
        keyId: made.device.keyId,
        certificateChain: chain,
      });
      const outcome = await service().run(token, nonce);
      expect(reason(outcome)).toBe('android_chain_invalid');
      expect(outcome.ok ? '' : outcome.detail).toMatch(/signature/);
    });

    it('the key description in an issuing certificate too (ATTEST_KEY)', async () => {
      const issuer = await intermediateWithKeyDescription(ca);
      const { outcome } = await register({ issuer });
      expect(reason(outcome)).toBe('android_chain_invalid');
      expect(outcome.ok ? '' : outcome.detail).toMatch(/leaf only/);
    });

    it('issuing certificates: validity checked on remotely provisioned chains only', async () => {
      const expired = { notBefore: new Date('2020-01-01'), notAfter: new Date('2025-01-01') };
      const factory = await createAndroidTestCa({ intermediateValidity: expired });
      const remote = await createAndroidTestCa({ intermediateValidity: expired, remote: true });
      for (const [c, want] of [
        [factory, 'accepted'],
        [remote, 'android_chain_invalid'],
      ] as const) {
        const nonce = randomBytes(32);
        const made = await androidRegistration(c, { nonce });
        const svc = service();
        const verifiers = buildVerifiers({
          allowlist: createMemoryAllowlist({ android: [androidKeyPolicy()] }),
          appleKeys: createMemoryAppleKeyStore(),
          appleRoots: defaultAppleRoots(),
          android: {
            keys: svc.keys,
            roots: c.roots,
            revocations: () => revocationListOf(new Map()),
          },
        });
        const outcome = await verifyToken(
          { token: made.token, expectedNonce: nonce },
          { now: () => ANDROID_NOW, verifiers },
        );
        expect(reason(outcome)).toBe(want);
      }
    });
  });

  describe('3. revocation (android_chain_revoked)', () => {
    it.each(['REVOKED', 'SUSPENDED'])(
      'a %s leaf serial, compared as an integer',
      async (status) => {
        const revoked = new Map([[0x0abcdefn, { status, reason: 'KEY_COMPROMISE' }]]);
        // the certificate writes 00 0a bc de f0-style bytes; the list writes "abcdef" without zeros
        const { outcome } = await register({ serialHex: '0abcdef' }, service({ revoked }));
        expect(reason(outcome)).toBe('android_chain_revoked');
        expect(outcome.facts.revokedSerial).toBe('abcdef');
      },
    );

    it('an issuing certificate on the list; another status does not reject', async () => {
      const revoked = new Map([[0x0an, { status: 'REVOKED' }]]);
      expect(reason((await register({}, service({ revoked }))).outcome)).toBe(
        'android_chain_revoked',
      );
      const other = new Map([[0x0an, { status: 'UNKNOWN_STATUS' }]]);
      expect(reason((await register({}, service({ revoked: other }))).outcome)).toBe('accepted');
    });
  });

  it('4. a challenge that is not SHA-256(final nonce) (android_challenge_mismatch)', async () => {
    const nonce = randomBytes(32);
    const { outcome } = await register({ nonce, description: { challenge: nonce } });
    expect(reason(outcome)).toBe('android_challenge_mismatch');
  });

  describe('5. key id and key type', () => {
    it('a keyId that is not SHA-256 of the leaf key (android_key_id_mismatch)', async () => {
      const { outcome } = await register({ keyId: randomBytes(32) });
      expect(reason(outcome)).toBe('android_key_id_mismatch');
    });

    it('an RSA-1024 key (android_key_unsupported)', async () => {
      const { outcome } = await register({ device: createAndroidDeviceKey({ rsaBits: 1024 }) });
      expect(reason(outcome)).toBe('android_key_unsupported');
    });

    it('an RSA key with another exponent than 65537, whose every assertion would cost more (android_key_unsupported)', async () => {
      const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048, publicExponent: 3 });
      const { outcome } = await register({ device: androidDeviceKeyOf(privateKey) });
      expect(reason(outcome)).toBe('android_key_unsupported');
      expect(outcome.ok ? '' : outcome.detail).toMatch(/exponent/);
    });
  });

  describe('6. package and app signature', () => {
    it('a key made by another app than the token names', async () => {
      const { outcome } = await register({
        description: { packages: [{ name: 'com.example.other', version: 1 }] },
      });
      expect(reason(outcome)).toBe('android_package_not_allowed');
    });

    it('a package off the allowlist, or listed without key attestation', async () => {
      expect(reason((await register({}, service({ policy: null }))).outcome)).toBe(
        'android_package_not_allowed',
      );
      const off = androidKeyPolicy({ keyAttestation: false });
      expect(reason((await register({}, service({ policy: off }))).outcome)).toBe(
        'android_package_not_allowed',
      );
    });

    it('a signing certificate the entry does not list (android_app_signature_mismatch)', async () => {
      const listed = androidKeyPolicy({ certificateDigests: [new Uint8Array(32).fill(1)] });
      expect(reason((await register({}, service({ policy: listed }))).outcome)).toBe(
        'android_app_signature_mismatch',
      );
      const ok = androidKeyPolicy({ certificateDigests: [APP_DIGEST] });
      expect(reason((await register({}, service({ policy: ok }))).outcome)).toBe('accepted');
    });
  });

  describe('7. security level (android_security_level_insufficient)', () => {
    it('a software attestation or KeyMint never passes', async () => {
      for (const description of [
        { attestationSecurityLevel: 'Software' as const },
        { keyMintSecurityLevel: 'Software' as const },
      ]) {
        expect(reason((await register({ description })).outcome)).toBe(
          'android_security_level_insufficient',
        );
      }
    });

    it('TEE under a StrongBox minimum; StrongBox passes it', async () => {
      const strongbox = androidKeyPolicy({ minSecurityLevel: 'StrongBox' });
      expect(reason((await register({}, service({ policy: strongbox }))).outcome)).toBe(
        'android_security_level_insufficient',
      );
      const both = {
        attestationSecurityLevel: 'StrongBox' as const,
        keyMintSecurityLevel: 'StrongBox' as const,
      };
      const { outcome } = await register(
        { description: both, attestation: { subject: FACTORY_STRONGBOX_SUBJECT } },
        service({ policy: strongbox }),
      );
      expect(reason(outcome)).toBe('accepted');
      expect(
        outcome.ok &&
          outcome.details.service === 'android-key' &&
          outcome.details.androidKeyDetails.securityLevel,
      ).toBe('StrongBox');
    });
  });

  describe('8. boot state (android_boot_state_insufficient)', () => {
    const unlocked = {
      rootOfTrust: { deviceLocked: false, verifiedBootState: 'Unverified' as const },
    };
    const bootKey = new Uint8Array(32).fill(0x6e);
    const selfSigned = {
      rootOfTrust: {
        deviceLocked: true,
        verifiedBootState: 'SelfSigned' as const,
        verifiedBootKey: bootKey,
      },
    };

    it('an unlocked device, unless the entry allows it', async () => {
      expect(reason((await register({ description: unlocked })).outcome)).toBe(
        'android_boot_state_insufficient',
      );
      const allow = service({ policy: androidKeyPolicy({ allowUnlocked: true }) });
      expect(reason((await register({ description: unlocked }, allow)).outcome)).toBe('accepted');
    });

    it('a locked self-signed OS passes only with its boot key listed', async () => {
      expect(reason((await register({ description: selfSigned })).outcome)).toBe(
        'android_boot_state_insufficient',
      );
      const listed = service({ policy: androidKeyPolicy({ bootKeys: [bootKey] }) });
      expect(reason((await register({ description: selfSigned }, listed)).outcome)).toBe(
        'accepted',
      );
    });

    it('no hardware-enforced root of trust', async () => {
      expect(reason((await register({ description: { rootOfTrust: null } })).outcome)).toBe(
        'android_boot_state_insufficient',
      );
    });
  });

  describe('9. patch level (android_patch_level_stale)', () => {
    const maxAge = service({ policy: androidKeyPolicy({ maxPatchAgeMonths: 12 }) });
    it('older than the maximum age at the verification time', async () => {
      expect(
        reason((await register({ description: { osPatchLevel: 202510 } }, maxAge)).outcome),
      ).toBe('android_patch_level_stale');
      expect(
        reason((await register({ description: { osPatchLevel: 202511 } }, maxAge)).outcome),
      ).toBe('accepted');
      expect(
        reason((await register({ description: { osPatchLevel: null } }, maxAge)).outcome),
      ).toBe('android_patch_level_stale');
    });

    it('not checked without a maximum', async () => {
      expect(reason((await register({ description: { osPatchLevel: 201801 } })).outcome)).toBe(
        'accepted',
      );
    });
  });
});

describe('android-key assertion', () => {
  async function registered(svc = service(), options: Partial<RegistrationOptions> = {}) {
    const { outcome, device } = await register(options, svc);
    expect(reason(outcome)).toBe('accepted');
    return device;
  }

  it('EC and RSA keys sign the final nonce; details come from the stored facts', async () => {
    const svc = service();
    for (const device of [
      await registered(svc),
      await registered(svc, { device: createAndroidDeviceKey({ rsaBits: 2048 }) }),
    ]) {
      const nonce = randomBytes(40);
      const outcome = await svc.run(androidAssertion(device, nonce), nonce);
      expect(reason(outcome)).toBe('accepted');
      expect(outcome.facts.shape).toBe('assertion');
    }
  });

  it('a signature over another nonce (android_signature_invalid)', async () => {
    const svc = service();
    const device = await registered(svc);
    const nonce = randomBytes(32);
    const signature = signAndroidAssertion(device, randomBytes(32));
    expect(reason(await svc.run(androidAssertion(device, nonce, { signature }), nonce))).toBe(
      'android_signature_invalid',
    );
    const garbage = new Uint8Array([1, 2, 3]);
    expect(
      reason(await svc.run(androidAssertion(device, nonce, { signature: garbage }), nonce)),
    ).toBe('android_signature_invalid');
  });

  it('a signature for an unknown key; a chain for a registered one', async () => {
    const svc = service();
    const nonce = randomBytes(32);
    expect(reason(await svc.run(androidAssertion(createAndroidDeviceKey(), nonce), nonce))).toBe(
      'android_key_unknown',
    );
    const device = await registered(svc);
    const again = await register({ device }, svc);
    expect(reason(again.outcome)).toBe('android_key_registered');
  });

  it('a policy made stricter applies to keys registered before', async () => {
    const svc = service();
    const device = await registered(svc);
    svc.policies[0] = androidKeyPolicy({ minSecurityLevel: 'StrongBox' });
    const nonce = randomBytes(32);
    expect(reason(await svc.run(androidAssertion(device, nonce), nonce))).toBe(
      'android_security_level_insufficient',
    );
    svc.policies[0] = androidKeyPolicy({ keyAttestation: false });
    expect(reason(await svc.run(androidAssertion(device, nonce), nonce))).toBe(
      'android_package_not_allowed',
    );
    svc.policies[0] = androidKeyPolicy({ maxPatchAgeMonths: 1 });
    const later = new Date('2027-06-01T00:00:00Z');
    expect(reason(await svc.run(androidAssertion(device, nonce), nonce, later))).toBe(
      'android_patch_level_stale',
    );
  });

  it('another package than the key was registered for', async () => {
    const svc = service();
    const device = await registered(svc);
    const nonce = randomBytes(32);
    expect(
      reason(
        await svc.run(androidAssertion(device, nonce, { packageName: 'com.example.x' }), nonce),
      ),
    ).toBe('android_package_not_allowed');
  });

  it('a key registered by a test API key is unknown to live keys', async () => {
    const keys = createMemoryAndroidKeyStore();
    const device = await registered(service({ keys, mode: 'test' }));
    const nonce = randomBytes(32);
    const live = service({ keys });
    expect(reason(await live.run(androidAssertion(device, nonce), nonce))).toBe(
      'android_key_unknown',
    );
    expect(
      reason(await live.run(androidAssertion(device, nonce), nonce, ANDROID_NOW, 'test')),
    ).toBe('accepted');
  });
});

describe('android-key evidence shape (token_malformed)', () => {
  it.each([
    ['no packageName', { keyId: new Uint8Array(32), signature: new Uint8Array(8) }],
    [
      'a short keyId',
      { packageName: ANDROID_PACKAGE, keyId: new Uint8Array(31), signature: new Uint8Array(8) },
    ],
    [
      'an empty chain',
      { packageName: ANDROID_PACKAGE, keyId: new Uint8Array(32), certificateChain: [] },
    ],
    [
      '11 certificates',
      {
        packageName: ANDROID_PACKAGE,
        keyId: new Uint8Array(32),
        certificateChain: Array(11).fill(new Uint8Array(4)),
      },
    ],
    [
      'both chain and signature',
      {
        packageName: ANDROID_PACKAGE,
        keyId: new Uint8Array(32),
        certificateChain: [new Uint8Array(4)],
        signature: new Uint8Array(8),
      },
    ],
    ['neither', { packageName: ANDROID_PACKAGE, keyId: new Uint8Array(32) }],
  ])('%s', async (_name, fields) => {
    const nonce = randomBytes(32);
    const evidence = new Map<string, unknown>(
      Object.entries(fields).map(([k, v]) => [
        k,
        Array.isArray(v)
          ? v.map((b) => Buffer.from(b as Uint8Array))
          : v instanceof Uint8Array
            ? Buffer.from(v)
            : v,
      ]),
    );
    const token = encodeEnvelope({ nonce, service: 'android-key', evidence });
    expect(reason(await service().run(token, nonce))).toBe('token_malformed');
  });
});
