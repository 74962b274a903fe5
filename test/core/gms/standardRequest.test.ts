/**
 * Standard requests through the decoder port: the request hash binding, configuration and
 * decoder outcomes (rejection vs fault), and a decoded payload that fails each later check.
 * The decoder here answers as Google does for tokens it issued (the HTTP side is
 * test/google/playIntegrityClient.test.ts and the end-to-end suite).
 */
import { randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  GOOGLE_STANDARD_CHECKS,
  createGoogleVerifier,
} from '../../../src/core/gms/googleVerifier.js';
import { VERDICT_CHECKS } from '../../../src/core/gms/verdictResult.js';
import { createMemoryAllowlist } from '../../../src/core/memoryStores.js';
import type { AndroidPackagePolicy, IntegrityTokenDecoder } from '../../../src/core/ports.js';
import { TraceRecorder } from '../../../src/core/trace.js';
import { createTestServiceAccount, type TestServiceAccount } from '../../support/fakeGoogle.js';
import {
  TEST_PACKAGE,
  createGoogleTestKeys,
  googlePolicy,
  randomNonce,
  runVerifier,
  type GoogleTestKeys,
} from '../../support/googleFactory.js';
import {
  requestHashOf,
  standardPayload,
  type StandardPayload,
} from '../../support/standardPayload.js';

const NOW = new Date('2026-03-01T12:00:00.000Z');
const nonce = randomNonce();

let keys: GoogleTestKeys;
let sa: TestServiceAccount;
beforeAll(async () => {
  keys = await createGoogleTestKeys('classic');
  sa = createTestServiceAccount();
});

/** Answers like Google: the payload of a token it issued, INVALID_ARGUMENT for any other. */
function memoryDecoder() {
  const issued = new Map<string, unknown>();
  const calls: string[] = [];
  const decoder: IntegrityTokenDecoder = {
    async decode({ packageName, integrityToken, serviceAccount }) {
      calls.push(`${packageName} ${serviceAccount.clientEmail}`);
      return issued.has(integrityToken)
        ? { ok: true, payload: issued.get(integrityToken) }
        : { ok: false, problem: 'Google refused the token: HTTP 400 INVALID_ARGUMENT' };
    },
  };
  return {
    decoder,
    calls,
    issue(payload: unknown) {
      const token = `standard-${randomBytes(12).toString('hex')}`;
      issued.set(token, payload);
      return token;
    },
  };
}

const standardEvidence = (integrityToken: string, request: unknown = 'standard') =>
  new Map<string, unknown>([
    ['packageName', TEST_PACKAGE],
    ['integrityToken', integrityToken],
    ['request', request],
  ]);

function setup(policy: Partial<AndroidPackagePolicy> = {}, withDecoder = true) {
  const google = memoryDecoder();
  const verifier = createGoogleVerifier({
    allowlist: createMemoryAllowlist({
      android: [googlePolicy(keys, { serviceAccount: sa.account, ...policy })],
    }),
    ...(withDecoder ? { decoder: google.decoder } : {}),
  });
  const run = (edit?: (p: StandardPayload) => void, o: { now?: Date; issuedAt?: Date } = {}) => {
    const token = google.issue(
      standardPayload({ nonce, now: o.issuedAt ?? NOW, ...(edit ? { edit } : {}) }),
    );
    return runVerifier(verifier, standardEvidence(token), { nonce, now: o.now ?? NOW });
  };
  return { google, verifier, run };
}

describe('a valid standard request', () => {
  it('is accepted with the contract fields and the extensions Google sent', async () => {
    const run = await setup().run();
    expect(run.ok && run.details).toEqual({
      service: 'gms',
      googleTokenDetails: {
        packageName: TEST_PACKAGE,
        deviceIntegrityVerdicts: ['MEETS_DEVICE_INTEGRITY'],
        timestampMillis: NOW.getTime(),
        appLicensingVerdict: 'LICENSED',
        playProtectVerdict: 'NO_ISSUES',
        appsDetected: [
          'KNOWN_INSTALLED',
          'KNOWN_CAPTURING',
          'UNKNOWN_INSTALLED',
          'UNKNOWN_OVERLAYS',
        ],
        deviceActivityLevel: 'LEVEL_2',
        deviceRecall: {
          bitFirst: true,
          bitSecond: false,
          bitThird: true,
          writeDates: { yyyymmFirst: 202401, yyyymmSecond: 202312, yyyymmThird: 202401 },
        },
        sdkVersion: 33,
        versionCode: '42',
      },
    });
    expect(run.facts).toMatchObject({ packageName: TEST_PACKAGE, request: 'standard' });
  });

  it('runs the standard checks in order (the newer verdicts skipped when not required)', async () => {
    const run = await setup().run();
    expect(run.checks.map((c) => [c.id, c.status])).toEqual(
      GOOGLE_STANDARD_CHECKS.map((id) => [
        id,
        (VERDICT_CHECKS as readonly string[]).includes(id) ? 'skip' : 'pass',
      ]),
    );
  });

  it('leaves out the extensions the payload does not carry', async () => {
    const run = await setup().run((p) => {
      delete p.accountDetails;
      delete p.environmentDetails;
      p.deviceIntegrity = { deviceRecognitionVerdict: ['MEETS_DEVICE_INTEGRITY'] };
      delete p.appIntegrity.versionCode;
    });
    expect(run.ok && run.details.service === 'gms' && run.details.googleTokenDetails).toEqual({
      packageName: TEST_PACKAGE,
      deviceIntegrityVerdicts: ['MEETS_DEVICE_INTEGRITY'],
      timestampMillis: NOW.getTime(),
    });
  });

  it('asks the decoder with the package and its service account', async () => {
    const { run, google } = setup();
    await run();
    expect(google.calls).toEqual([`${TEST_PACKAGE} ${sa.account.clientEmail}`]);
  });
});

describe('gms.request', () => {
  it('"classic" or absent is a classic request: the decoder is never asked', async () => {
    const { verifier, google } = setup();
    const run = await runVerifier(verifier, standardEvidence('a.b.c.d.e', 'classic'), {
      nonce,
      now: NOW,
    });
    expect(run.ok ? 'accepted' : run.reason).toBe('gms_decrypt_failed');
    expect(google.calls).toEqual([]);
  });

  it.each([['premium'], [1], [null]])('%j is token_malformed', async (request) => {
    const run = await runVerifier(setup().verifier, standardEvidence('x', request), {
      nonce,
      now: NOW,
    });
    expect(run.ok ? 'accepted' : run.reason).toBe('token_malformed');
  });
});

describe('configuration and decoder outcomes', () => {
  it('a package without a service account rejects standard tokens without asking Google', async () => {
    const { run, google } = setup({ serviceAccount: null });
    const result = await run();
    expect(result.ok ? 'accepted' : result.reason).toBe('gms_standard_not_configured');
    expect(result.checks.find((c) => c.status === 'fail')?.id).toBe('gms.decode');
    expect(google.calls).toEqual([]);
  });

  it('a token Google refuses is gms_decode_rejected', async () => {
    const run = await runVerifier(setup().verifier, standardEvidence('never-issued'), {
      nonce,
      now: NOW,
    });
    expect(run.ok ? 'accepted' : run.reason).toBe('gms_decode_rejected');
  });

  it('a decoder fault is thrown, never a verdict', async () => {
    const failing: IntegrityTokenDecoder = {
      decode: async () => {
        throw new Error('Google unreachable');
      },
    };
    const verifier = createGoogleVerifier({
      allowlist: createMemoryAllowlist({
        android: [googlePolicy(keys, { serviceAccount: sa.account })],
      }),
      decoder: failing,
    });
    await expect(runVerifier(verifier, standardEvidence('t'), { nonce, now: NOW })).rejects.toThrow(
      'Google unreachable',
    );
  });

  it('without a decoder a standard token is a fault', async () => {
    await expect(setup({}, false).run()).rejects.toThrow(/decoder/);
  });

  it("a key scoped to other packages is refused before Google is asked: no decode under another package's service account", async () => {
    const { verifier, google } = setup();
    const token = google.issue(standardPayload({ nonce, now: NOW }));
    const trace = new TraceRecorder();
    await expect(
      verifier.verify(standardEvidence(token), {
        nonce,
        now: NOW,
        trace,
        appScope: ['com.example.other'],
      }),
    ).rejects.toMatchObject({ reason: 'app_not_in_key_scope' });
    expect(google.calls).toEqual([]);
    // a key scoped to the package is decoded and accepted as before
    const details = await verifier.verify(standardEvidence(token), {
      nonce,
      now: NOW,
      trace: new TraceRecorder(),
      appScope: [TEST_PACKAGE],
    });
    expect(details.service).toBe('gms');
    expect(google.calls).toHaveLength(1);
  });
});

describe('a decoded payload that fails each check', () => {
  const cases: [string, (p: StandardPayload) => void, string, string][] = [
    [
      'no requestDetails',
      (p) => void delete (p as Partial<StandardPayload>).requestDetails,
      'gms_payload_malformed',
      'gms.payload',
    ],
    [
      'neither requestHash nor nonce',
      (p) => void delete p.requestDetails.requestHash,
      'gms_payload_malformed',
      'gms.payload',
    ],
    [
      'a classic nonce instead of the request hash',
      (p) => {
        delete p.requestDetails.requestHash;
        p.requestDetails.nonce = Buffer.from(nonce).toString('base64url');
      },
      'gms_nonce_mismatch',
      'gms.requestHash',
    ],
    [
      'the hash of another nonce',
      (p) => void (p.requestDetails.requestHash = requestHashOf(randomNonce())),
      'gms_nonce_mismatch',
      'gms.requestHash',
    ],
    [
      'the final nonce itself, not its hash',
      (p) => void (p.requestDetails.requestHash = Buffer.from(nonce).toString('base64url')),
      'gms_nonce_mismatch',
      'gms.requestHash',
    ],
    [
      'the hash as hex',
      (p) =>
        void (p.requestDetails.requestHash = Buffer.from(
          requestHashOf(nonce),
          'base64url',
        ).toString('hex')),
      'gms_nonce_mismatch',
      'gms.requestHash',
    ],
    [
      'another requestPackageName',
      (p) => void (p.requestDetails.requestPackageName = 'com.example.other'),
      'gms_package_mismatch',
      'gms.packageMatch',
    ],
    [
      'another appIntegrity.packageName',
      (p) => void (p.appIntegrity.packageName = 'com.example.other'),
      'gms_package_mismatch',
      'gms.packageMatch',
    ],
    [
      'an unrecognized version',
      (p) => void (p.appIntegrity.appRecognitionVerdict = 'UNRECOGNIZED_VERSION'),
      'gms_app_not_recognized',
      'gms.recognition',
    ],
    [
      'an unevaluated app',
      (p) => void (p.appIntegrity = { appRecognitionVerdict: 'UNEVALUATED' }),
      'gms_app_not_recognized',
      'gms.recognition',
    ],
    [
      'an unknown signing certificate',
      (p) =>
        void (p.appIntegrity.certificateSha256Digest = [randomBytes(32).toString('base64url')]),
      'gms_certificate_mismatch',
      'gms.certificate',
    ],
    [
      'basic integrity only',
      (p) => void (p.deviceIntegrity.deviceRecognitionVerdict = ['MEETS_BASIC_INTEGRITY']),
      'gms_integrity_insufficient',
      'gms.integrity',
    ],
    [
      'no device verdict at all',
      (p) => void (p.deviceIntegrity = {}),
      'gms_integrity_insufficient',
      'gms.integrity',
    ],
  ];
  it.each(cases)('%s', async (_name, edit, reason, check) => {
    const run = await setup().run(edit);
    expect(run.ok ? 'accepted' : run.reason).toBe(reason);
    expect(run.checks.find((c) => c.status === 'fail')?.id).toBe(check);
  });

  it('issued too long ago, or too far ahead', async () => {
    const { run } = setup();
    expect(await run(undefined, { issuedAt: new Date(NOW.getTime() - 601_000) })).toMatchObject({
      ok: false,
      reason: 'gms_token_stale',
    });
    expect(await run(undefined, { issuedAt: new Date(NOW.getTime() + 61_000) })).toMatchObject({
      ok: false,
      reason: 'gms_token_stale',
    });
    expect(await run(undefined, { issuedAt: new Date(NOW.getTime() - 599_000) })).toMatchObject({
      ok: true,
    });
  });
});
