import { beforeAll, describe, expect, it } from 'vitest';
import {
  GOOGLE_CHECKS,
  INTEGRITY_TOKEN_MAX_BYTES,
  createGoogleVerifier,
} from '../../../src/core/gms/googleVerifier.js';
import { VERDICT_CHECKS } from '../../../src/core/gms/verdictResult.js';
import { createMemoryAllowlist } from '../../../src/core/memoryStores.js';
import type {
  AndroidPackagePolicy,
  MinVerdict,
  PlatformVerifier,
} from '../../../src/core/ports.js';
import {
  TEST_CERT_DIGEST,
  TEST_PACKAGE,
  createGoogleTestKeys,
  googleEvidence,
  googlePolicy,
  mintIntegrityToken,
  randomNonce,
  runVerifier,
  type GoogleTestKeys,
  type MintOptions,
} from '../../support/googleFactory.js';

const NOW = new Date('2026-03-01T12:00:00.000Z');
const nonce = randomNonce();

let keys: GoogleTestKeys;
let otherKeys: GoogleTestKeys;

beforeAll(async () => {
  keys = await createGoogleTestKeys('current');
  otherKeys = await createGoogleTestKeys('stranger');
});

function verifierFor(policy: AndroidPackagePolicy = googlePolicy(keys)): PlatformVerifier {
  return createGoogleVerifier({ allowlist: createMemoryAllowlist({ android: [policy] }) });
}

/** Mints a token with `change` applied and verifies it against `policy`. */
async function check(change: Partial<MintOptions> = {}, policy?: AndroidPackagePolicy, now = NOW) {
  const token = await mintIntegrityToken({ keys, nonce, now: NOW, ...change });
  return runVerifier(verifierFor(policy), googleEvidence(token), { nonce, now });
}

async function reasonOf(
  change: Partial<MintOptions> = {},
  policy?: AndroidPackagePolicy,
  now = NOW,
) {
  const run = await check(change, policy, now);
  return run.ok ? 'accepted' : run.reason;
}

describe('a valid token', () => {
  it('is accepted with the token details', async () => {
    const run = await check({
      deviceVerdicts: ['MEETS_BASIC_INTEGRITY', 'MEETS_DEVICE_INTEGRITY'],
    });
    expect(run.ok).toBe(true);
    if (!run.ok) return;
    expect(run.details).toEqual({
      service: 'gms',
      googleTokenDetails: {
        packageName: TEST_PACKAGE,
        deviceIntegrityVerdicts: ['MEETS_BASIC_INTEGRITY', 'MEETS_DEVICE_INTEGRITY'],
        timestampMillis: NOW.getTime(),
        // extensions, because the factory's payload carries them
        appLicensingVerdict: 'LICENSED',
        versionCode: '42',
      },
    });
    expect(run.facts.packageName).toBe(TEST_PACKAGE);
  });

  it('passes every check, in the documented order', async () => {
    const run = await check();
    // the newer-verdict checks are skipped: this policy requires none of them
    expect(run.checks.map((c) => [c.id, c.status])).toEqual(
      GOOGLE_CHECKS.map((id) => [
        id,
        (VERDICT_CHECKS as readonly string[]).includes(id) ? 'skip' : 'pass',
      ]),
    );
  });

  it('never puts key material or the token into a detail', async () => {
    const token = await mintIntegrityToken({ keys, nonce, now: NOW });
    const runs = [
      await runVerifier(verifierFor(), googleEvidence(token), { nonce, now: NOW }),
      await runVerifier(verifierFor(), googleEvidence(token), { nonce: randomNonce(), now: NOW }),
      await runVerifier(verifierFor(googlePolicy(otherKeys)), googleEvidence(token), {
        nonce,
        now: NOW,
      }),
    ];
    const secrets = [keys.decryptionKey, keys.verificationKey, otherKeys.decryptionKey].flatMap(
      (k) => [
        Buffer.from(k).toString('base64'),
        Buffer.from(k).toString('base64url'),
        Buffer.from(k).toString('hex'),
      ],
    );
    for (const run of runs) {
      const text = JSON.stringify(run);
      expect(text).not.toContain(token.slice(0, 40));
      for (const s of secrets) expect(text).not.toContain(s.slice(0, 16));
    }
  });
});

describe('the evidence map', () => {
  const ctx = { nonce, now: NOW };

  it.each([
    ['not a map', { packageName: TEST_PACKAGE, integrityToken: 'x' }],
    [
      'a packageName that is not text',
      new Map<string, unknown>([
        ['packageName', 7],
        ['integrityToken', 'x'],
      ]),
    ],
    ['no packageName', new Map<string, unknown>([['integrityToken', 'x']])],
    [
      'an integrityToken that is bytes',
      new Map<string, unknown>([
        ['packageName', TEST_PACKAGE],
        ['integrityToken', new Uint8Array(3)],
      ]),
    ],
    ['no integrityToken', new Map<string, unknown>([['packageName', TEST_PACKAGE]])],
    ['an integrityToken over 16 KiB', googleEvidence('a'.repeat(INTEGRITY_TOKEN_MAX_BYTES + 1))],
    [
      'an integrityToken over 16 KiB in UTF-8 bytes',
      googleEvidence('é'.repeat(INTEGRITY_TOKEN_MAX_BYTES / 2 + 1)),
    ],
  ])('with %s is token_malformed', async (_, evidence) => {
    const run = await runVerifier(verifierFor(), evidence, ctx);
    expect(run.ok ? 'accepted' : run.reason).toBe('token_malformed');
    expect(run.checks[0]).toMatchObject({ id: 'gms.evidence', status: 'fail' });
  });

  it('takes an integrityToken of exactly 16 KiB to the checks', async () => {
    const run = await runVerifier(
      verifierFor(),
      googleEvidence('a'.repeat(INTEGRITY_TOKEN_MAX_BYTES)),
      ctx,
    );
    expect(run.ok ? 'accepted' : run.reason).toBe('gms_decrypt_failed');
  });
});

describe('check 1: gms.package', () => {
  it('rejects a package that is not allowlisted, and records the claimed name', async () => {
    const token = await mintIntegrityToken({
      keys,
      nonce,
      now: NOW,
      packageName: 'com.example.other',
    });
    const run = await runVerifier(verifierFor(), googleEvidence(token, 'com.example.other'), {
      nonce,
      now: NOW,
    });
    expect(run.ok ? 'accepted' : run.reason).toBe('gms_package_not_allowed');
    expect(run.facts.packageName).toBe('com.example.other');
    expect(run.checks.find((c) => c.status === 'fail')?.id).toBe('gms.package');
  });
});

describe('check 2: gms.decrypt', () => {
  it('rejects a token sealed with another key', async () => {
    expect(await reasonOf({ jwe: { encryptWith: otherKeys } })).toBe('gms_decrypt_failed');
  });

  it('rejects text that is not a JWE', async () => {
    const run = await runVerifier(verifierFor(), googleEvidence('not.a.jwe'), { nonce, now: NOW });
    expect(run.ok ? 'accepted' : run.reason).toBe('gms_decrypt_failed');
  });

  it('rejects a package with no key pairs', async () => {
    expect(await reasonOf({}, googlePolicy([]))).toBe('gms_decrypt_failed');
  });
});

describe('check 3: gms.signature', () => {
  it('rejects a JWS signed by another key', async () => {
    expect(await reasonOf({ jws: { signWith: otherKeys } })).toBe('gms_signature_invalid');
  });
});

describe('check 4: gms.payload', () => {
  it.each<[string, Partial<MintOptions>]>([
    ['not JSON', { payloadText: 'requestDetails=...' }],
    [
      'JSON that is not UTF-8',
      { payloadText: new Uint8Array([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]) },
    ],
    ['a JSON array', { editPayload: () => [] }],
    ['no requestDetails', { editPayload: (p) => void delete p.requestDetails }],
    ['no appIntegrity', { editPayload: (p) => void delete p.appIntegrity }],
    ['no deviceIntegrity', { editPayload: (p) => void delete p.deviceIntegrity }],
    [
      'no nonce (a standard request)',
      { editPayload: (p) => void delete (p.requestDetails as Record<string, unknown>).nonce },
    ],
    ['a timestamp that is not a number', { timestampMillis: '12:00' }],
    ['a negative timestamp', { timestampMillis: -1 }],
    ['a fractional timestamp', { timestampMillis: 1.5 }],
    [
      'a verdict list that is not a list',
      {
        editPayload: (p) =>
          void (p.deviceIntegrity = { deviceRecognitionVerdict: 'MEETS_DEVICE_INTEGRITY' }),
      },
    ],
    ['PLAY_RECOGNIZED without the app package name', { appPackageName: null }],
    ['PLAY_RECOGNIZED without certificate digests', { certificateDigests: null }],
  ])('rejects a payload with %s', async (_, change) => {
    expect(await reasonOf(change)).toBe('gms_payload_malformed');
  });

  it('accepts a numeric timestampMillis and unknown members', async () => {
    const run = await check({
      timestampMillis: NOW.getTime(),
      editPayload: (p) => void (p.environmentDetails = { playProtectVerdict: 'NO_ISSUES' }),
    });
    expect(
      run.ok && run.details.service === 'gms' && run.details.googleTokenDetails.timestampMillis,
    ).toBe(NOW.getTime());
  });
});

describe('check 5: gms.nonce', () => {
  it('rejects a token bound to another nonce', async () => {
    expect(await reasonOf({ nonce: randomNonce() })).toBe('gms_nonce_mismatch');
  });

  it('rejects a nonce that is a prefix of the final nonce', async () => {
    expect(await reasonOf({ nonce: nonce.slice(0, 31) })).toBe('gms_nonce_mismatch');
  });

  it('rejects a nonce that is not base64url', async () => {
    expect(await reasonOf({ nonceText: 'not base64!' })).toBe('gms_nonce_mismatch');
  });

  it('accepts the nonce with padding', async () => {
    const padded = Buffer.from(nonce).toString('base64url') + '=';
    expect(await reasonOf({ nonceText: padded })).toBe('accepted');
  });
});

describe('check 6: gms.packageMatch', () => {
  it('rejects another requestPackageName', async () => {
    expect(await reasonOf({ requestPackageName: 'com.example.other' })).toBe(
      'gms_package_mismatch',
    );
  });

  it('rejects another appIntegrity.packageName even when requestPackageName matches', async () => {
    expect(await reasonOf({ appPackageName: 'com.example.repackaged' })).toBe(
      'gms_package_mismatch',
    );
  });

  it('goes on when Google did not evaluate the app (no appIntegrity.packageName)', async () => {
    const run = await check({
      appRecognitionVerdict: 'UNEVALUATED',
      appPackageName: null,
      certificateDigests: null,
    });
    expect(run.ok ? 'accepted' : run.reason).toBe('gms_app_not_recognized');
    expect(run.checks.find((c) => c.id === 'gms.packageMatch')?.status).toBe('pass');
  });
});

describe('check 7: gms.recognition', () => {
  it('rejects UNRECOGNIZED_VERSION by default', async () => {
    expect(await reasonOf({ appRecognitionVerdict: 'UNRECOGNIZED_VERSION' })).toBe(
      'gms_app_not_recognized',
    );
  });

  it('accepts UNRECOGNIZED_VERSION where the entry allows it', async () => {
    const policy = googlePolicy(keys, { allowUnrecognized: true });
    expect(await reasonOf({ appRecognitionVerdict: 'UNRECOGNIZED_VERSION' }, policy)).toBe(
      'accepted',
    );
  });

  it.each(['UNEVALUATED', 'PLAY_RECOGNISED', ''])(
    'rejects %j even where unrecognized versions are allowed',
    async (verdict) => {
      const policy = googlePolicy(keys, { allowUnrecognized: true });
      expect(await reasonOf({ appRecognitionVerdict: verdict }, policy)).toBe(
        'gms_app_not_recognized',
      );
    },
  );
});

describe('check 8: gms.certificate', () => {
  const otherDigest = new Uint8Array(32).fill(7);

  it('rejects a build signed with another certificate', async () => {
    expect(await reasonOf({ certificateDigests: [otherDigest] })).toBe('gms_certificate_mismatch');
  });

  it('rejects an empty digest list', async () => {
    expect(await reasonOf({ certificateDigests: [] })).toBe('gms_certificate_mismatch');
  });

  it('rejects a digest that only matches as text, not as bytes', async () => {
    const truncated = Buffer.from(TEST_CERT_DIGEST).toString('base64url').slice(0, 40);
    expect(
      await reasonOf({
        editPayload: (p) =>
          void ((p.appIntegrity as Record<string, unknown>).certificateSha256Digest = [truncated]),
      }),
    ).toBe('gms_certificate_mismatch');
  });

  it('accepts when any listed digest is allowed, in any base64 form', async () => {
    const padded = Buffer.from(TEST_CERT_DIGEST).toString('base64');
    expect(await reasonOf({ certificateDigests: [otherDigest, TEST_CERT_DIGEST] })).toBe(
      'accepted',
    );
    expect(
      await reasonOf({
        editPayload: (p) =>
          void ((p.appIntegrity as Record<string, unknown>).certificateSha256Digest = [padded]),
      }),
    ).toBe('accepted');
  });

  it('accepts when the entry allows one of several certificates', async () => {
    expect(
      await reasonOf(
        {},
        googlePolicy(keys, { certificateDigests: [otherDigest, TEST_CERT_DIGEST] }),
      ),
    ).toBe('accepted');
  });

  it('is skipped when the entry lists no digests', async () => {
    const run = await check(
      { certificateDigests: [otherDigest] },
      googlePolicy(keys, { certificateDigests: [] }),
    );
    expect(run.ok).toBe(true);
    expect(run.checks.find((c) => c.id === 'gms.certificate')?.status).toBe('skip');
  });
});

describe('check 9: gms.integrity', () => {
  const BASIC = 'MEETS_BASIC_INTEGRITY';
  const DEVICE = 'MEETS_DEVICE_INTEGRITY';
  const STRONG = 'MEETS_STRONG_INTEGRITY';

  it.each<[MinVerdict, string[] | null, string]>([
    [DEVICE, null, 'gms_integrity_insufficient'],
    [DEVICE, [], 'gms_integrity_insufficient'],
    [DEVICE, [BASIC], 'gms_integrity_insufficient'],
    [DEVICE, ['MEETS_VIRTUAL_INTEGRITY'], 'gms_integrity_insufficient'],
    [DEVICE, [DEVICE], 'accepted'],
    [DEVICE, [STRONG], 'accepted'],
    [DEVICE, [BASIC, DEVICE, STRONG], 'accepted'],
    [BASIC, [BASIC], 'accepted'],
    [BASIC, [DEVICE], 'accepted'],
    [BASIC, null, 'gms_integrity_insufficient'],
    [STRONG, [BASIC, DEVICE], 'gms_integrity_insufficient'],
    [STRONG, [STRONG], 'accepted'],
  ])('minimum %s with verdicts %j: %s', async (minVerdict, verdicts, expected) => {
    expect(await reasonOf({ deviceVerdicts: verdicts }, googlePolicy(keys, { minVerdict }))).toBe(
      expected,
    );
  });

  it('reports the verdict list as given (empty when absent)', async () => {
    const run = await check({ deviceVerdicts: null }, googlePolicy(keys, { minVerdict: BASIC }));
    expect(run.ok).toBe(false);
    const listed = await check({ deviceVerdicts: [STRONG, 'MEETS_VIRTUAL_INTEGRITY'] });
    expect(
      listed.ok &&
        listed.details.service === 'gms' &&
        listed.details.googleTokenDetails.deviceIntegrityVerdicts,
    ).toEqual([STRONG, 'MEETS_VIRTUAL_INTEGRITY']);
  });

  it('treats an unknown minimum in the allowlist as a fault, not a rejection', async () => {
    const policy = googlePolicy(keys, { minVerdict: 'MEETS_SOME_INTEGRITY' as MinVerdict });
    // runVerifier turns a Rejection into a result, so only a fault can reach `rejects`
    await expect(check({}, policy)).rejects.toThrow(Error);
    await expect(check({}, googlePolicy(keys, { maxAgeSeconds: Number.NaN }))).rejects.toThrow(
      Error,
    );
  });
});

describe('check 10: gms.freshness', () => {
  const at = (ms: number) => new Date(NOW.getTime() + ms);

  it.each<[string, number, number, string]>([
    ['exactly the maximum age', 600, -600_000, 'accepted'],
    ['1 ms older than the maximum age', 600, -600_001, 'gms_token_stale'],
    ['a shorter maximum age, exactly', 30, -30_000, 'accepted'],
    ['a shorter maximum age, 1 ms over', 30, -30_001, 'gms_token_stale'],
    ['exactly 60 s in the future', 600, 60_000, 'accepted'],
    ['60 s and 1 ms in the future', 600, 60_001, 'gms_token_stale'],
    ['a day old', 600, -86_400_000, 'gms_token_stale'],
  ])('%s', async (_, maxAgeSeconds, offsetMs, expected) => {
    const policy = googlePolicy(keys, { maxAgeSeconds });
    expect(await reasonOf({ timestampMillis: String(at(offsetMs).getTime()) }, policy)).toBe(
      expected,
    );
  });

  it('measures against the verification clock, not the token', async () => {
    expect(await reasonOf({}, undefined, at(600_001))).toBe('gms_token_stale');
  });
});

describe('check order', () => {
  it('reports the first failing check', async () => {
    const run = await check({
      nonce: randomNonce(),
      requestPackageName: 'com.example.other',
      deviceVerdicts: [],
      timestampMillis: '0',
    });
    expect(run.ok ? 'accepted' : run.reason).toBe('gms_nonce_mismatch');
    expect(run.checks.map((c) => c.status)).toEqual([
      'pass',
      'pass',
      'pass',
      'pass',
      'pass',
      'fail',
      ...Array(12).fill('skip'),
    ]);
  });
});

describe('createGoogleVerifier', () => {
  it('refuses missing dependencies at construction', () => {
    expect(() => createGoogleVerifier({} as never)).toThrow(TypeError);
  });
});
