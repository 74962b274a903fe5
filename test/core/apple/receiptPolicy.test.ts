/**
 * What registration does with the attestation's receipt, and the app entry's receipt, risk metric
 * and distribution rules (`--require-receipt`, `--max-risk-metric`, `--validation-category`,
 * `--min-bundle-version`, `--allow-missing-validation-category`): each passes and rejects as
 * docs/token-format.md says. Real receipts where the rule is about Apple's bytes.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { createAppleVerifier } from '../../../src/core/apple/appleVerifier.js';
import {
  compareBundleVersions,
  readDistribution,
} from '../../../src/core/apple/appleDistribution.js';
import { defaultAppleRoots } from '../../../src/core/apple/trustRoots.js';
import {
  createMemoryAllowlist,
  createMemoryAppleKeyStore,
} from '../../../src/core/memoryStores.js';
import type { AppleAppPolicy, AppleKeyRecord } from '../../../src/core/ports.js';
import type { VerifyOutcome } from '../../../src/core/outcome.js';
import { verifyToken } from '../../../src/core/verify.js';
import {
  createAssertion,
  createAttestation,
  createDeviceKey,
  createTestCa,
  type DeviceKey,
  encodeAppleToken,
  encodeCbor,
  TEST_APP_ID,
  TEST_NONCE,
  TEST_NOW,
  type TestCa,
} from '../../support/appleFactory.js';
import { after, loadReceiptVectors, type ReceiptVector } from '../../support/receiptVectors.js';

const vectors = loadReceiptVectors();
const vector = (name: string) => vectors.find((v) => v.name === name)!;
const reason = (o: VerifyOutcome) => (o.ok ? 'accepted' : o.reason);
const detailsOf = (o: VerifyOutcome) =>
  o.ok && o.details.service === 'apple' ? o.details.appleTokenDetails : undefined;
const checkOf = (o: VerifyOutcome, id: string) => o.checks.find((c) => c.id === id);

/** Registers a real capture's attestation at `now` under an app entry with `policy`. */
async function registerReal(v: ReceiptVector, now: Date, policy: Partial<AppleAppPolicy> = {}) {
  const keys = createMemoryAppleKeyStore();
  const verifier = createAppleVerifier({
    roots: defaultAppleRoots(),
    allowlist: createMemoryAllowlist({ apple: [{ appId: v.appId, env: 'any', ...policy }] }),
    keys,
  });
  const outcome = await verifyToken(
    {
      token: encodeAppleToken({ keyId: v.keyId, attestation: v.attestation }),
      expectedNonce: TEST_NONCE,
      clientDataHash: v.clientDataHash,
    },
    { now: () => now, verifiers: { apple: verifier } },
  );
  return { outcome, stored: keys.records.get(v.keyId.toString('hex')) };
}

describe('the receipt at registration (real captures)', () => {
  const v = vector('veehaitch-ios-14.2');
  const created = v.check.fields.creationTime.parsed;

  it('a valid receipt passes, and is stored with the key with its facts', async () => {
    const { outcome, stored } = await registerReal(v, after(created, 5), { requireReceipt: true });
    expect(reason(outcome)).toBe('accepted');
    expect(outcome.facts.receipt).toBe('valid');
    expect(checkOf(outcome, 'apple.attestation.receipt')?.status).toBe('pass');
    expect(stored!.receipt).toMatchObject({
      problem: null,
      type: 'ATTEST',
      creationTime: new Date(created),
      riskMetric: null,
    });
    expect(Buffer.from(stored!.receipt!.bytes).equals(v.receipt)).toBe(true);
  });

  it('an invalid receipt is reported and kept, and rejects only under requireReceipt', async () => {
    // at verifyAt the receipt is 2.8 s in the future (the independent check says "no")
    const at = new Date(v.check.verifyAt);
    const kept = await registerReal(v, at);
    expect(reason(kept.outcome)).toBe('accepted');
    expect(kept.outcome.facts).toMatchObject({
      receipt: 'invalid',
      receiptProblem: expect.stringMatching(/after the verification time/),
    });
    expect(checkOf(kept.outcome, 'apple.attestation.receipt')?.status).toBe('skip');
    expect(kept.stored!.receipt!.problem).toMatch(/after the verification time/);

    const refused = await registerReal(v, at, { requireReceipt: true });
    expect(refused.outcome).toMatchObject({
      ok: false,
      reason: 'apple_receipt_invalid',
      detail: expect.stringMatching(/after the verification time/),
    });
    expect(refused.stored).toBeUndefined();
  });

  it('the 2020 webauthn4j receipt (not RFC 5652) rejects under requireReceipt only', async () => {
    const w = vector('webauthn4j-appattest');
    const at = after(w.check.fields.creationTime.parsed, 5);
    expect(reason((await registerReal(w, at)).outcome)).toBe('accepted');
    const refused = await registerReal(w, at, { requireReceipt: true });
    expect(refused.outcome).toMatchObject({
      reason: 'apple_receipt_invalid',
      detail: expect.stringMatching(/CMS signature/),
    });
  });

  it("Apple's 2026 sample: receipt valid, validation category and bundle version in the details", async () => {
    const s = vector('apple-doc-sample-2026');
    const { outcome, stored } = await registerReal(
      s,
      after(s.check.fields.creationTime.parsed, 5),
      {
        requireReceipt: true,
      },
    );
    expect(detailsOf(outcome)).toMatchObject({
      validationCategory: 'platform',
      bundleVersion: '1',
    });
    expect(stored).toMatchObject({ validationCategory: 'platform', bundleVersion: '1' });
  });
});

let ca: TestCa;
beforeAll(async () => {
  ca = await createTestCa();
});

/** One verifier over `policy` and `keys`, at TEST_NOW, with the factory's CA. */
function service(policy: Partial<AppleAppPolicy>, keys = createMemoryAppleKeyStore()) {
  const verifier = createAppleVerifier({
    roots: ca.roots,
    allowlist: createMemoryAllowlist({ apple: [{ appId: TEST_APP_ID, env: 'any', ...policy }] }),
    keys,
  });
  return {
    keys,
    verify: (token: Uint8Array) =>
      verifyToken(
        { token, expectedNonce: TEST_NONCE },
        { now: () => TEST_NOW, verifiers: { apple: verifier } },
      ),
  };
}

const extensions = (category: number | null, version: string | null) => {
  const map = new Map<unknown, unknown>();
  if (category !== null) {
    const bytes = Buffer.alloc(4);
    bytes.writeUInt32LE(category);
    map.set('apple_validation_category_01', bytes);
  }
  if (version !== null) map.set('apple_bundle_version_01', version);
  return map;
};

async function registration(device: DeviceKey, ext: Map<unknown, unknown> | null) {
  const { attestation } = await createAttestation(ca, device, ext ? { extensions: ext } : {});
  return encodeAppleToken({ keyId: device.keyId, attestation });
}

describe('a registration without a receipt, or with bytes that are not one', () => {
  it('an invalid one is accepted and reported; requireReceipt rejects it', async () => {
    const device = await createDeviceKey();
    const token = await registration(device, null);
    const open = await service({}).verify(token);
    expect(reason(open)).toBe('accepted');
    expect(open.facts).toMatchObject({ receipt: 'invalid', receiptProblem: expect.any(String) });
    expect(await service({ requireReceipt: true }).verify(token)).toMatchObject({
      reason: 'apple_receipt_invalid',
      detail: expect.stringMatching(/receipt invalid/),
    });
  });

  it('a missing one is accepted and reported; requireReceipt rejects it', async () => {
    const device = await createDeviceKey();
    const { attestation } = await createAttestation(ca, device, { receipt: null });
    const token = encodeAppleToken({ keyId: device.keyId, attestation });
    const open = await service({}).verify(token);
    expect(reason(open)).toBe('accepted');
    expect(open.facts.receipt).toBe('missing');
    expect(await service({ requireReceipt: true }).verify(token)).toMatchObject({
      reason: 'apple_receipt_invalid',
      detail: expect.stringMatching(/no receipt/),
    });
  });
});

describe('the risk metric on assertions', () => {
  async function asserted(riskMetric: number | null, maxRiskMetric: number | null) {
    const device = await createDeviceKey();
    const record: AppleKeyRecord = {
      keyId: device.keyId,
      publicKey: device.spki,
      appId: TEST_APP_ID,
      environment: 'Production',
      counter: 0,
      riskMetric,
    };
    const s = service({ maxRiskMetric }, createMemoryAppleKeyStore([record]));
    const { assertion } = createAssertion(device, { counter: 1 });
    return s.verify(encodeAppleToken({ keyId: device.keyId, assertion }));
  }

  it('above the limit: apple_risk_exceeded', async () => {
    expect(await asserted(4, 3)).toMatchObject({
      reason: 'apple_risk_exceeded',
      detail: expect.stringMatching(/risk metric for this key is 4, above the 3/),
    });
  });
  it('at the limit: accepted, with riskMetric in the details', async () => {
    const outcome = await asserted(3, 3);
    expect(detailsOf(outcome)?.riskMetric).toBe(3);
  });
  it('no limit: accepted whatever the metric', async () => {
    expect(detailsOf(await asserted(50, null))?.riskMetric).toBe(50);
  });
  it('no refreshed receipt yet: accepted, and no riskMetric in the details', async () => {
    const outcome = await asserted(null, 1);
    expect(reason(outcome)).toBe('accepted');
    expect(detailsOf(outcome)).not.toHaveProperty('riskMetric');
  });
});

describe('distribution (iOS 27 extensions) at registration', () => {
  const cases: [string, Partial<AppleAppPolicy>, number | null, string | null, string][] = [
    ['category allowed', { validationCategories: ['testflight'] }, 2, '7', 'accepted'],
    [
      'category refused',
      { validationCategories: ['appstore'] },
      2,
      '7',
      'apple_distribution_not_allowed',
    ],
    [
      'undocumented number',
      { validationCategories: ['appstore'] },
      9,
      '7',
      'apple_distribution_not_allowed',
    ],
    [
      'bundle version too low',
      { minBundleVersion: '7.1' },
      4,
      '7',
      'apple_distribution_not_allowed',
    ],
    ['bundle version equal', { minBundleVersion: '7' }, 4, '7', 'accepted'],
    ['bundle version numerically higher', { minBundleVersion: '1.9' }, 4, '1.10', 'accepted'],
    [
      'bundle version not numbers',
      { minBundleVersion: '1' },
      4,
      'beta',
      'apple_distribution_not_allowed',
    ],
    [
      'no extensions, rule set',
      { validationCategories: ['appstore'] },
      null,
      null,
      'apple_distribution_not_allowed',
    ],
    [
      'no extensions, missing allowed',
      { validationCategories: ['appstore'], allowMissingValidationCategory: true },
      null,
      null,
      'accepted',
    ],
    ['no extensions, no rule', {}, null, null, 'accepted'],
    [
      'category but no version, version rule',
      { minBundleVersion: '1', allowMissingValidationCategory: true },
      4,
      null,
      'apple_distribution_not_allowed',
    ],
  ];
  for (const [name, policy, category, version, expected] of cases) {
    it(`${name}: ${expected}`, async () => {
      const device = await createDeviceKey();
      const ext = category === null && version === null ? null : extensions(category, version);
      const outcome = await service(policy).verify(await registration(device, ext));
      expect(reason(outcome)).toBe(expected);
    });
  }

  it('accepted: the details and the stored key carry both', async () => {
    const device = await createDeviceKey();
    const s = service({ validationCategories: ['appstore', 'testflight'] });
    const outcome = await s.verify(await registration(device, extensions(4, '42.1')));
    expect(detailsOf(outcome)).toMatchObject({
      validationCategory: 'appstore',
      bundleVersion: '42.1',
    });
    expect(s.keys.records.get(Buffer.from(device.keyId).toString('hex'))).toMatchObject({
      validationCategory: 'appstore',
      bundleVersion: '42.1',
    });
  });
});

describe('distribution on assertions', () => {
  async function assertFor(
    stored: string | null,
    own: Map<unknown, unknown> | null,
    policy: Partial<AppleAppPolicy>,
  ) {
    const device = await createDeviceKey();
    const record: AppleKeyRecord = {
      keyId: device.keyId,
      publicKey: device.spki,
      appId: TEST_APP_ID,
      environment: 'Production',
      counter: 0,
      validationCategory: stored,
      bundleVersion: stored ? '5' : null,
    };
    const s = service(policy, createMemoryAppleKeyStore([record]));
    const { assertion } = createAssertion(device, {
      counter: 1,
      ...(own ? { authDataTrailer: encodeCbor(own) } : {}),
    });
    return s.verify(encodeAppleToken({ keyId: device.keyId, assertion }));
  }

  it("a rule added after registration applies to the key's stored category", async () => {
    expect(
      reason(await assertFor('testflight', null, { validationCategories: ['appstore'] })),
    ).toBe('apple_distribution_not_allowed');
    expect(reason(await assertFor('appstore', null, { validationCategories: ['appstore'] }))).toBe(
      'accepted',
    );
  });
  it("the assertion's own extensions (signed by the key) are read first", async () => {
    const outcome = await assertFor('testflight', extensions(4, '6'), {
      validationCategories: ['appstore'],
    });
    expect(detailsOf(outcome)).toMatchObject({
      validationCategory: 'appstore',
      bundleVersion: '6',
    });
  });
});

describe('the extensions decoder and version order', () => {
  it('reads 4 little-endian bytes and a text version; other shapes are named', () => {
    expect(readDistribution(extensions(4, '1'))).toEqual({
      validationCategory: 'appstore',
      bundleVersion: '1',
      problem: null,
    });
    expect(readDistribution(null)).toEqual({
      validationCategory: null,
      bundleVersion: null,
      problem: null,
    });
    const odd = new Map<unknown, unknown>([['apple_validation_category_01', Buffer.alloc(3)]]);
    expect(readDistribution(odd)).toMatchObject({
      validationCategory: null,
      problem: expect.any(String),
    });
    const long = new Map<unknown, unknown>([['apple_bundle_version_01', 'x'.repeat(65)]]);
    expect(readDistribution(long)).toMatchObject({
      bundleVersion: null,
      problem: expect.any(String),
    });
  });
  it('compares dotted numbers numerically', () => {
    expect(compareBundleVersions('1.10', '1.9')).toBe(1);
    expect(compareBundleVersions('2', '2.0.0')).toBe(0);
    expect(compareBundleVersions('3.1', '3.2')).toBe(-1);
    expect(compareBundleVersions('1.a', '1')).toBeNull();
  });
});

describe('a refreshed risk metric reaches a verifier that cached the key', () => {
  it('at its next assertion: the counter update fails on the changed row, which is read again', async () => {
    const device = await createDeviceKey();
    const keys = createMemoryAppleKeyStore([
      {
        keyId: device.keyId,
        publicKey: device.spki,
        appId: TEST_APP_ID,
        environment: 'Production',
        counter: 0,
        riskMetric: null,
      },
    ]);
    const verifier = createAppleVerifier({
      roots: ca.roots,
      allowlist: createMemoryAllowlist({
        apple: [{ appId: TEST_APP_ID, env: 'any', maxRiskMetric: 5 }],
      }),
      keys,
    });
    const at = (ms: number, counter: number) =>
      verifyToken(
        {
          token: encodeAppleToken({
            keyId: device.keyId,
            assertion: createAssertion(device, { counter }).assertion,
          }),
          expectedNonce: TEST_NONCE,
        },
        { now: () => new Date(TEST_NOW.getTime() + ms), verifiers: { apple: verifier } },
      );
    expect(reason(await at(0, 1))).toBe('accepted');
    keys.records.get(Buffer.from(device.keyId).toString('hex'))!.riskMetric = 9;
    // well within the cached row's minute: the raise of the counter names the metric it judged
    expect(await at(30_000, 2)).toMatchObject({ reason: 'apple_risk_exceeded' });
    // and the rejected assertion raised nothing: counter 2 is still above the stored one
    keys.records.get(Buffer.from(device.keyId).toString('hex'))!.riskMetric = 3;
    expect(reason(await at(31_000, 2))).toBe('accepted');
  });
});
