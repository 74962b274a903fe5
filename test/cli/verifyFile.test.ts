/**
 * `attest verify-file`: real captures, every hint (each produced by the mistake it names and
 * absent without it), the `--json` document and the text report, the unchecked nonce, usage
 * errors, and database mode (read-only, same verdicts as the server).
 */
import { ANDROID_KEY_CHECKS } from '../../src/core/androidKey/androidKeyChecks.js';
import { GOOGLE_PC_CHECKS } from '../../src/core/gmsPc/pcVerifier.js';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { APPLE_CHECKS } from '../../src/core/apple/appleVerifier.js';
import { CHECK_TITLES, type CheckId } from '../../src/core/checkTitles.js';
import { GOOGLE_CHECKS, GOOGLE_STANDARD_CHECKS } from '../../src/core/gms/googleVerifier.js';
import { buildVerifiers } from '../../src/core/verifiers.js';
import { ENVELOPE_CHECKS, verifyToken } from '../../src/core/verify.js';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import { createCachedAllowlist } from '../../src/db/cachedAllowlist.js';
import { createAppleKeyRepository } from '../../src/db/appleKeys.js';
import { openDatabase } from '../../src/db/client.js';
import { rowsOf, type DatabaseHandle } from '../../src/db/database.js';
import { runMigrations } from '../../src/db/migrate.js';
import { createSessionRepository } from '../../src/db/sessions.js';
import {
  createAssertion,
  createAttestation,
  createDeviceKey,
  createTestCa,
  encodeAppleToken,
  sha256,
  TEST_APP_ID,
  TEST_NOW,
  type DeviceKey,
  type TestCa,
} from '../support/appleFactory.js';
import {
  createGoogleTestKeys,
  keyPairOf,
  mintIntegrityToken,
  TEST_CERT_DIGEST,
  TEST_PACKAGE,
  type GoogleTestKeys,
} from '../support/googleFactory.js';
import { createTestService, issueKey, verify } from '../support/service.js';
import {
  captureToken,
  gmsToken,
  hintCodes,
  loadCaptures,
  scratch,
  verifyFile,
  type VerifyFileJson,
  type VerifyFileRun,
} from '../support/verifyFileTokens.js';
import { TEST_MASTER_KEY_ENV, TEST_SECRETS } from '../support/secrets.js';

const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64');
const AT = TEST_NOW.toISOString();
const pemOf = (device: DeviceKey) =>
  device.publicKey.export({ type: 'spki', format: 'pem' }).toString();

let files: ReturnType<typeof scratch>;
beforeAll(() => {
  files = scratch();
});
afterAll(() => files?.remove());

/** every check is titled, and the document is consistent with its verdict */
function expectCoherent(json: VerifyFileJson) {
  for (const check of json.checks) {
    expect(check.title).toBe(CHECK_TITLES[check.id as CheckId]);
    expect(Object.keys(check).sort()).toEqual(
      check.status === 'fail'
        ? ['detail', 'id', 'reason', 'status', 'title']
        : ['detail', 'id', 'status', 'title'],
    );
  }
  const failed = json.checks.filter((c) => c.status === 'fail');
  if (json.valid) {
    expect(failed).toEqual([]);
    expect(json.hints).toEqual([]);
  } else {
    expect(failed).toHaveLength(1);
    expect(failed[0]!.reason).toBe(json.reason);
    expect(failed[0]!.detail).toBe(json.detail);
    // everything after the failing check was not reached
    for (const c of json.checks.slice(json.checks.indexOf(failed[0]!) + 1))
      expect(c).toMatchObject({ status: 'skip', detail: 'not reached' });
  }
}

function expectValid(run: VerifyFileRun) {
  expect(run.stderr).toBe('');
  expect({
    code: run.code,
    valid: run.json?.valid,
    reason: run.json?.reason,
    hints: hintCodes(run),
  }).toEqual({ code: 0, valid: true, reason: undefined, hints: [] });
  expectCoherent(run.json!);
}

function expectRejected(run: VerifyFileRun, reason: string, hints: string[] = []) {
  expect(run.stderr).toBe('');
  expect({
    code: run.code,
    valid: run.json?.valid,
    reason: run.json?.reason,
    hints: hintCodes(run),
  }).toEqual({ code: 1, valid: false, reason, hints });
  expectCoherent(run.json!);
}

// ---------------------------------------------------------------------------------------------

describe('real App Attest captures', () => {
  const captures = loadCaptures();
  const attestations = captures.filter((c) => c.attestation);
  const assertions = captures.flatMap((c) =>
    c.assertions.map((a, i) => ({ name: `${c.id}#${i}`, capture: c, assertion: a })),
  );
  // its signature does not verify with the client data its source prints (VECTORS.md)
  const UNCONFIRMED = 'thedhejavu-appattest-rs#0';

  it('are all here: 18 attestations, 14 assertions', () => {
    expect(attestations).toHaveLength(18);
    expect(assertions).toHaveLength(14);
  });

  it.each(attestations.map((c) => [c.id, c] as const))(
    '%s: valid at its verifyAt, rejected today with leaf_expired',
    async (_id, capture) => {
      const path = files.file(captureToken(capture));
      const flags = [
        '--app-id',
        capture.appId,
        '--client-data-hash',
        capture.clientDataHash!,
        '--json',
      ];

      const then = await verifyFile([path, '--at', capture.verifyAt!, ...flags]);
      expectValid(then);
      expect(then.json).toMatchObject({
        source: 'flags',
        trustRoots: 'apple',
        nonceChecked: false,
        verifiedAt: new Date(capture.verifyAt!).toISOString(),
        facts: { service: 'apple', shape: 'registration', appId: capture.appId },
        details: {
          service: 'apple',
          appleTokenDetails: {
            keyIdentifier: capture.keyId,
            appId: capture.appId,
            environment: capture.environment === 'development' ? 'Development' : 'Production',
            assertionCounter: 0,
          },
        },
      });

      const today = await verifyFile([path, ...flags]);
      expectRejected(today, 'apple_chain_invalid', ['leaf_expired']);
      expect(today.json!.checks.find((c) => c.status === 'fail')!.id).toBe(
        'apple.attestation.chain',
      );
    },
  );

  it.each(assertions.filter((a) => a.name !== UNCONFIRMED).map((a) => [a.name, a] as const))(
    '%s: valid above the stored counter, apple_counter_replay at it',
    async (_name, { capture, assertion }) => {
      const path = files.file(captureToken(capture, { assertion: assertion.assertion }));
      const flags = [
        '--apple-key',
        assertion.publicKeyPem,
        '--app-id',
        capture.appId,
        '--client-data-hash',
        assertion.clientDataHash,
        '--json',
      ];
      const fresh = await verifyFile([
        path,
        '--counter',
        String(assertion.expectedCounter - 1),
        ...flags,
      ]);
      expectValid(fresh);
      expect(fresh.json).toMatchObject({
        facts: { shape: 'assertion' },
        details: {
          appleTokenDetails: {
            keyIdentifier: capture.keyId,
            appId: capture.appId,
            assertionCounter: assertion.expectedCounter,
          },
        },
      });
      const replay = await verifyFile([
        path,
        '--counter',
        String(assertion.expectedCounter),
        ...flags,
      ]);
      expectRejected(replay, 'apple_counter_replay', ['counter_replay']);
      expect(replay.json!.hints[0]!.message).toMatch(/replayed request/);
    },
  );

  it.each(
    assertions
      .filter((a) => a.name !== UNCONFIRMED && a.capture.attestation)
      .map((a) => [a.name, a] as const),
  )(
    '%s with its attestation: valid at verifyAt as attestation plus assertion, no key needed',
    async (_name, { capture, assertion }) => {
      const path = files.file(
        captureToken(capture, { assertion: assertion.assertion, withAttestation: true }),
      );
      const run = await verifyFile([
        path,
        '--at',
        capture.verifyAt!,
        '--app-id',
        capture.appId,
        '--client-data-hash',
        assertion.clientDataHash,
        '--json',
      ]);
      expectValid(run);
      expect(run.json!.facts.shape).toBe('attestation+assertion');
      expect(run.json!.checks.find((c) => c.id === 'apple.attestation.nonce')).toMatchObject({
        status: 'skip',
      });
      expect(run.json!.details).toMatchObject({
        appleTokenDetails: {
          keyIdentifier: capture.keyId,
          assertionCounter: assertion.expectedCounter,
        },
      });
    },
  );

  it(`${UNCONFIRMED}: rejected with apple_signature_invalid, and no hint explains it`, async () => {
    const { capture, assertion } = assertions.find((a) => a.name === UNCONFIRMED)!;
    const path = files.file(captureToken(capture, { assertion: assertion.assertion }));
    const run = await verifyFile([
      path,
      '--apple-key',
      assertion.publicKeyPem,
      '--counter',
      '0',
      '--app-id',
      capture.appId,
      '--client-data-hash',
      assertion.clientDataHash,
      '--json',
    ]);
    expectRejected(run, 'apple_signature_invalid');
  });

  it('reads the token as base64 text (wrapped, or URL-safe) and the key as a PEM file, with the same verdict', async () => {
    const capture = captures.find((c) => c.id === 'bas-d-appattest')!;
    const assertion = capture.assertions[0]!;
    const token = captureToken(capture, { assertion: assertion.assertion });
    const wrapped = token.toString('base64').replace(/.{76}/g, '$&\n') + '\n';
    const keyFile = files.file(assertion.publicKeyPem, 'key.pem');
    for (const path of [files.file(wrapped), files.file(token.toString('base64url'))]) {
      const run = await verifyFile([
        path,
        '--apple-key',
        keyFile,
        '--counter',
        String(assertion.expectedCounter - 1),
        '--app-id',
        capture.appId,
        '--client-data-hash',
        assertion.clientDataHash,
        '--json',
      ]);
      expectValid(run);
      expect(run.json!.checks.find((c) => c.id === 'token.decode')!.detail).toContain(
        `${token.length} bytes`,
      );
    }
  });

  describe('team ID and app ID hints (Apple writes the app ID into the leaf)', () => {
    it.each([
      ['veehaitch-ios-14.4', '6MURL8TA57.de.vincent-haupert.apple-appattest-poc'],
      // Apple's own sample: an underscore in the bundle ID
      ['apple-doc-sample-2024', '0352187391.com.apple.example_app_attest'],
    ])(
      '%s: team_id_mismatch for the same bundle under another team, app_not_allowlisted for another app',
      async (id, appId) => {
        const capture = captures.find((c) => c.id === id)!;
        expect(capture.appId).toBe(appId);
        const path = files.file(captureToken(capture));
        const bundle = appId.slice(appId.indexOf('.') + 1);
        const run = (...ids: string[]) =>
          verifyFile([
            path,
            '--at',
            capture.verifyAt!,
            '--client-data-hash',
            capture.clientDataHash!,
            ...ids.flatMap((a) => ['--app-id', a]),
            '--json',
          ]);

        const otherTeam = await run(`ZZZZZ99999.${bundle}`);
        expectRejected(otherTeam, 'apple_app_not_allowed', ['team_id_mismatch']);
        expect(otherTeam.json!.hints[0]!.message).toContain(appId);
        expect(otherTeam.json!.hints[0]!.message).toContain(`ZZZZZ99999.${bundle}`);

        const otherApp = await run('ZZZZZ99999.com.example.other');
        expectRejected(otherApp, 'apple_app_not_allowed', ['app_not_allowlisted']);
        expect(otherApp.json!.hints[0]!.message).toContain(appId);

        // the mistake absent: the right app ID, among others
        expectValid(await run('ZZZZZ99999.com.example.other', appId));
      },
    );
  });
});

// ---------------------------------------------------------------------------------------------

describe('with factory-made tokens (ATTEST_APPLE_ROOT_CA = the test CA)', () => {
  let ca: TestCa;
  let env: Record<string, string>;
  let google: GoogleTestKeys;
  let googleFlags: string[];

  beforeAll(async () => {
    ca = await createTestCa();
    env = { ATTEST_APPLE_ROOT_CA: files.file(ca.rootPem, 'root.pem') };
    google = await createGoogleTestKeys();
    googleFlags = [
      '--package',
      TEST_PACKAGE,
      '--decryption-key',
      b64(google.decryptionKey),
      '--verification-key',
      b64(google.verificationKey),
    ];
  });

  /** verify-file --json with --at TEST_NOW and the test app allowed, offline */
  const run = (token: Uint8Array, ...flags: string[]) =>
    verifyFile([files.file(token), '--json', '--at', AT, '--app-id', TEST_APP_ID, ...flags], env);
  const runGms = (token: Uint8Array, ...flags: string[]) =>
    verifyFile([files.file(token), '--json', '--at', AT, ...googleFlags, ...flags], env);

  /** a registration token whose attestation binds `options.nonce` (default the token nonce) */
  async function registration(
    tokenNonce: Uint8Array,
    options: Parameters<typeof createAttestation>[2] = {},
  ) {
    const device = await createDeviceKey();
    const { attestation } = await createAttestation(ca, device, { nonce: tokenNonce, ...options });
    return encodeAppleToken({ nonce: tokenNonce, keyId: device.keyId, attestation });
  }

  describe('the JSON document and the text report', () => {
    it('has the documented fields, valid and rejected', async () => {
      const nonce = randomBytes(32);
      const token = await registration(nonce);
      const valid = await run(token, '--nonce', b64(nonce));
      expectValid(valid);
      expect(Object.keys(valid.json!).sort()).toEqual([
        'checks',
        'details',
        'facts',
        'hints',
        'mode',
        'nonceChecked',
        'receipt',
        'source',
        'trustRoots',
        'valid',
        'verifiedAt',
      ]);
      // the factory's receipt is not Apple's: shown as such, the token stays valid
      expect(valid.json).toMatchObject({
        receipt: { valid: false, type: null, problem: expect.any(String) },
      });
      expect(valid.json).toMatchObject({
        valid: true,
        verifiedAt: AT,
        nonceChecked: true,
        source: 'flags',
        trustRoots: 'ATTEST_APPLE_ROOT_CA',
        mode: 'live',
        hints: [],
      });
      expect(valid.json!.checks.map((c) => c.id)).toEqual([
        ...ENVELOPE_CHECKS,
        ...APPLE_CHECKS.registration,
      ]);
      expect(
        valid.json!.checks.filter((c) => c.status !== 'pass').map((c) => [c.id, c.status]),
      ).toEqual([
        ['apple.attestation.receipt', 'skip'],
        // the app sets no --max-verifies-per-device
        ['apple.deviceVelocity', 'skip'],
      ]);
      expect(valid.json!.details).toEqual({
        service: 'apple',
        appleTokenDetails: {
          keyIdentifier: valid.json!.facts.keyId,
          appId: TEST_APP_ID,
          environment: 'Production',
          assertionCounter: 0,
          platform: 'iOS',
        },
      });

      const rejected = await run(token, '--nonce', b64(randomBytes(32)));
      expectRejected(rejected, 'nonce_mismatch');
      expect(Object.keys(rejected.json!).sort()).toEqual([
        'checks',
        'detail',
        'facts',
        'hints',
        'mode',
        'nonceChecked',
        'reason',
        'receipt',
        'source',
        'trustRoots',
        'valid',
        'verifiedAt',
      ]);
      expect(rejected.json!.checks.map((c) => [c.id, c.status])).toEqual([
        ['token.decode', 'pass'],
        ['token.version', 'pass'],
        ['token.service', 'pass'],
        ['token.nonce', 'fail'],
      ]);
    });

    it('prints one line per check with [pass]/[FAIL]/[skip], then the verdict (and hints)', async () => {
      const nonce = randomBytes(32);
      const token = await registration(nonce, { clientDataHash: nonce }); // raw nonce as clientDataHash
      const path = files.file(token);
      const flags = ['--at', AT, '--app-id', TEST_APP_ID, '--nonce', b64(nonce)];
      const json = (await verifyFile([path, ...flags, '--json'], env)).json!;
      const text = await verifyFile([path, ...flags], env);
      expect(text.code).toBe(1);
      expect(text.stderr).toBe('');
      const lines = text.stdout.split('\n');
      expect(lines[0]).toBe(`token: service apple, registration, key ${String(json.facts.keyId)}`);
      expect(lines[1]).toBe(`verified at ${AT} against the flags given, as a live API key would`);
      const mark = { pass: 'pass', fail: 'FAIL', skip: 'skip', observed: 'OBSV' } as const;
      const checkLines = lines.filter((l) => /^ {2}\[(pass|FAIL|skip)\] /.test(l));
      expect(checkLines).toEqual(json.checks.map((c) => `  [${mark[c.status]}] ${c.title}`));
      for (const c of json.checks)
        expect(lines).toContain(`         ${c.id}: ${c.detail}${c.reason ? ` (${c.reason})` : ''}`);
      expect(lines).toContain(`REJECTED: apple_nonce_mismatch: ${json.detail}`);
      expect(lines).toContain(`  hint (raw_nonce_as_client_data_hash): ${json.hints[0]!.message}`);
      expect(text.stdout).not.toContain('NOT CHECKED');

      const ok = await verifyFile([files.file(await registration(nonce)), ...flags], env);
      expect(ok.code).toBe(0);
      const verdict = ok.stdout.split('\n').find((l) => l.startsWith('VALID (apple): '))!;
      expect(JSON.parse(verdict.slice('VALID (apple): '.length))).toMatchObject({
        appleTokenDetails: { appId: TEST_APP_ID, assertionCounter: 0 },
      });
      expect(ok.stdout).not.toContain('[FAIL]');
      expect(ok.stdout).not.toContain('hint (');
    });

    it('says so when no common mistake explains a rejection', async () => {
      const text = await verifyFile(
        [
          files.file(await registration(randomBytes(32))),
          '--at',
          AT,
          '--app-id',
          TEST_APP_ID,
          '--nonce',
          b64(randomBytes(32)),
        ],
        env,
      );
      expect(text.code).toBe(1);
      expect(text.stdout).toMatch(
        /\nREJECTED: nonce_mismatch: .*\n {2}no common integration mistake explains it\n$/,
      );
    });

    it('titles every check id the verifiers can report', () => {
      const ids = [
        ...ENVELOPE_CHECKS,
        ...GOOGLE_CHECKS,
        ...GOOGLE_STANDARD_CHECKS,
        ...Object.values(APPLE_CHECKS).flat(),
        ...Object.values(ANDROID_KEY_CHECKS).flat(),
        ...GOOGLE_PC_CHECKS,
      ];
      for (const id of ids) expect(CHECK_TITLES[id as CheckId], id).toEqual(expect.any(String));
      expect(Object.keys(CHECK_TITLES).sort()).toEqual([...new Set(ids)].sort());
    });
  });

  describe('without a nonce flag', () => {
    it('skips token.nonce, says NOT CHECKED, and runs every other check', async () => {
      const token = await registration(randomBytes(32));
      const json = await run(token);
      expectValid(json);
      expect(json.json!.nonceChecked).toBe(false);
      expect(json.json!.checks.find((c) => c.id === 'token.nonce')).toEqual({
        id: 'token.nonce',
        title: CHECK_TITLES['token.nonce'],
        status: 'skip',
        detail: expect.stringContaining('not checked'),
      });
      expect(json.json!.checks.filter((c) => c.status === 'pass').map((c) => c.id)).toEqual([
        'token.decode',
        'token.version',
        'token.service',
        ...APPLE_CHECKS.registration.filter(
          (id) => id !== 'apple.attestation.receipt' && id !== 'apple.deviceVelocity',
        ),
      ]);

      const text = await verifyFile([files.file(token), '--at', AT, '--app-id', TEST_APP_ID], env);
      expect(text.code).toBe(0);
      expect(text.stdout).toContain('nonce: NOT CHECKED (no --nonce or --server-nonce given)');
      expect(text.stdout).toContain('  [skip] token nonce equals the final nonce');
    });

    it('still checks the evidence against the token nonce (a broken binding is rejected)', async () => {
      const nonce = randomBytes(32);
      const token = await registration(nonce, { clientDataHash: sha256(randomBytes(32)) });
      expectRejected(await run(token), 'apple_nonce_mismatch');
    });
  });

  describe('hints: each one appears for its mistake, and not without it', () => {
    it('nonce_base64_text: the token nonce is the base64 text of the final nonce', async () => {
      const nonce = randomBytes(32);
      for (const text of [b64(nonce), Buffer.from(nonce).toString('base64url')]) {
        const mistaken = await registration(Buffer.from(text, 'utf8'));
        expectRejected(await run(mistaken, '--nonce', b64(nonce)), 'nonce_mismatch', [
          'nonce_base64_text',
        ]);
      }
      expectValid(await run(await registration(nonce), '--nonce', b64(nonce)));
    });

    it('nonce_base64_text: the device hashed the base64 text of the nonce as clientDataHash', async () => {
      const nonce = randomBytes(32);
      const mistaken = await registration(nonce, {
        clientDataHash: sha256(Buffer.from(b64(nonce), 'utf8')),
      });
      const run1 = await run(mistaken, '--nonce', b64(nonce));
      expectRejected(run1, 'apple_nonce_mismatch', ['nonce_base64_text']);
      // without a nonce flag the same hint comes from the token's own nonce
      expectRejected(await run(mistaken), 'apple_nonce_mismatch', ['nonce_base64_text']);
    });

    it('nonce_hashed_by_device: the token nonce is SHA-256 of the final nonce', async () => {
      const nonce = randomBytes(32);
      expectRejected(
        await run(await registration(sha256(nonce)), '--nonce', b64(nonce)),
        'nonce_mismatch',
        ['nonce_hashed_by_device'],
      );
      // a different nonce altogether: no hint
      expectRejected(
        await run(await registration(randomBytes(32)), '--nonce', b64(nonce)),
        'nonce_mismatch',
        [],
      );
    });

    it('device_nonce_missing: the token has serverNonce || deviceNonce, verify got no device nonce', async () => {
      const serverNonce = randomBytes(32);
      const deviceNonce = randomBytes(12);
      const token = await registration(Buffer.concat([serverNonce, deviceNonce]));
      expectRejected(await run(token, '--server-nonce', b64(serverNonce)), 'nonce_mismatch', [
        'device_nonce_missing',
      ]);
      expectValid(
        await run(token, '--server-nonce', b64(serverNonce), '--device-nonce', b64(deviceNonce)),
      );
      // another server nonce as prefix: no hint
      expectRejected(
        await run(token, '--server-nonce', b64(randomBytes(32))),
        'nonce_mismatch',
        [],
      );
    });

    it('device_nonce_not_used: verify got a device nonce the device did not append', async () => {
      const serverNonce = randomBytes(32);
      const deviceNonce = randomBytes(8);
      expectRejected(
        await run(
          await registration(serverNonce),
          '--server-nonce',
          b64(serverNonce),
          '--device-nonce',
          b64(deviceNonce),
        ),
        'nonce_mismatch',
        ['device_nonce_not_used'],
      );
      expectValid(await run(await registration(serverNonce), '--server-nonce', b64(serverNonce)));
    });

    it('raw_nonce_as_client_data_hash: attestation and assertion', async () => {
      const nonce = randomBytes(32);
      expectRejected(
        await run(await registration(nonce, { clientDataHash: nonce }), '--nonce', b64(nonce)),
        'apple_nonce_mismatch',
        ['raw_nonce_as_client_data_hash'],
      );

      const device = await createDeviceKey();
      const assertion = (clientDataHash?: Uint8Array) =>
        encodeAppleToken({
          nonce,
          keyId: device.keyId,
          assertion: createAssertion(device, {
            nonce,
            counter: 3,
            ...(clientDataHash ? { clientDataHash } : {}),
          }).assertion,
        });
      const keyFlags = ['--nonce', b64(nonce), '--apple-key', pemOf(device), '--counter', '2'];
      expectRejected(await run(assertion(nonce), ...keyFlags), 'apple_signature_invalid', [
        'raw_nonce_as_client_data_hash',
      ]);
      expectValid(await run(assertion(), ...keyFlags));
      // signed by another key: no hint
      const other = await createDeviceKey();
      const forged = encodeAppleToken({
        nonce,
        keyId: device.keyId,
        assertion: createAssertion(device, { nonce, counter: 3, signWith: other.privateKey })
          .assertion,
      });
      expectRejected(await run(forged, ...keyFlags), 'apple_signature_invalid', []);
    });

    it('leaf_expired: the chain verifies inside the leaf validity (old attestation, or clock behind)', async () => {
      const nonce = randomBytes(32);
      const old = await registration(nonce, {
        leafValidity: {
          notBefore: new Date('2025-01-01T00:00:00Z'),
          notAfter: new Date('2025-01-04T00:00:00Z'),
        },
      });
      const expired = await run(old, '--nonce', b64(nonce));
      expectRejected(expired, 'apple_chain_invalid', ['leaf_expired']);
      expect(expired.json!.hints[0]!.message).toContain('re-run with --at 2025-01-02T12:00:00Z');
      expectValid(await run(old, '--nonce', b64(nonce), '--at', '2025-01-02T12:00:00Z'));
      const withOffset = await run(old, '--nonce', b64(nonce), '--at', '2025-01-02T14:00:00+02:00');
      expectValid(withOffset);
      expect(withOffset.json!.verifiedAt).toBe('2025-01-02T12:00:00.000Z');

      const future = await registration(nonce, {
        leafValidity: {
          notBefore: new Date(TEST_NOW.getTime() + 86_400_000),
          notAfter: new Date(TEST_NOW.getTime() + 4 * 86_400_000),
        },
      });
      expectRejected(await run(future, '--nonce', b64(nonce)), 'apple_chain_invalid', [
        'leaf_expired',
      ]);

      // a chain to another root fails at every instant: no hint
      const stranger = await createTestCa();
      const device = await createDeviceKey();
      const untrusted = encodeAppleToken({
        nonce,
        keyId: device.keyId,
        attestation: (await createAttestation(stranger, device, { nonce })).attestation,
      });
      expectRejected(await run(untrusted, '--nonce', b64(nonce)), 'apple_chain_invalid', []);
    });

    it('token_age: a Play Integrity token older than the package allows passes at its issue time', async () => {
      const nonce = randomBytes(32);
      const issued = new Date(TEST_NOW.getTime() - 3_600_000);
      const token = gmsToken({
        nonce,
        packageName: TEST_PACKAGE,
        integrityToken: await mintIntegrityToken({ keys: google, nonce, now: issued }),
      });
      const stale = await runGms(token, '--nonce', b64(nonce));
      expectRejected(stale, 'gms_token_stale', ['token_age']);
      const fresh = await runGms(
        token,
        '--nonce',
        b64(nonce),
        '--at',
        new Date(issued.getTime() + 5_000).toISOString(),
      );
      expectValid(fresh);
      expect(fresh.json!.details).toEqual({
        service: 'gms',
        googleTokenDetails: {
          packageName: TEST_PACKAGE,
          deviceIntegrityVerdicts: ['MEETS_DEVICE_INTEGRITY'],
          timestampMillis: issued.getTime(),
          appLicensingVerdict: 'LICENSED',
          versionCode: '42',
        },
      });
      // from the future (device clock ahead)
      const ahead = gmsToken({
        nonce,
        packageName: TEST_PACKAGE,
        integrityToken: await mintIntegrityToken({
          keys: google,
          nonce,
          now: new Date(TEST_NOW.getTime() + 600_000),
        }),
      });
      expectRejected(await runGms(ahead, '--nonce', b64(nonce)), 'gms_token_stale', ['token_age']);
    });

    it('other_package_keys needs a second package: offline, a token sealed with unknown keys gets no hint', async () => {
      const nonce = randomBytes(32);
      const stranger = await createGoogleTestKeys();
      const token = gmsToken({
        nonce,
        packageName: TEST_PACKAGE,
        integrityToken: await mintIntegrityToken({ keys: stranger, nonce, now: TEST_NOW }),
      });
      expectRejected(await runGms(token, '--nonce', b64(nonce)), 'gms_decrypt_failed', []);
    });
  });

  describe('usage errors: exit 2, one line on stderr, nothing on stdout, no database opened', () => {
    let token: string;
    let dataDir: string;
    beforeAll(async () => {
      token = files.file(await registration(randomBytes(32)));
      dataDir = join(files.dir, 'never-created');
    });
    afterAll(() => {
      expect(existsSync(dataDir)).toBe(false);
    });

    const nonce = b64(randomBytes(32));
    it.each([
      [
        '--nonce with --server-nonce',
        () => [token, '--nonce', nonce, '--server-nonce', nonce],
        /not both/,
      ],
      [
        '--device-nonce alone',
        () => [token, '--device-nonce', nonce],
        /--device-nonce needs --server-nonce/,
      ],
      ['a bad --at', () => [token, '--at', 'yesterday'], /--at takes an ISO 8601 time/],
      [
        'an impossible --at',
        () => [token, '--at', '2021-13-45T00:00:00Z'],
        /--at takes an ISO 8601 time/,
      ],
      [
        'an --at without its offset (it would be local time)',
        () => [token, '--at', '2021-01-23T12:13:33'],
        /--at takes an ISO 8601 time with its offset/,
      ],
      ['bad base64 in --nonce', () => [token, '--nonce', 'not base64!'], /--nonce must be base64/],
      [
        'bad base64 in --client-data-hash',
        () => [token, '--client-data-hash', 'AAA=A'],
        /--client-data-hash must be base64/,
      ],
      [
        '--apple-key without --app-id',
        () => [token, '--apple-key', '-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----'],
        /--apple-key needs exactly one --app-id/,
      ],
      [
        '--apple-key that is no key',
        () => [
          token,
          '--app-id',
          TEST_APP_ID,
          '--apple-key',
          '-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----',
        ],
        /not a PEM public key/,
      ],
      [
        '--counter out of range',
        () => [
          token,
          '--app-id',
          TEST_APP_ID,
          '--apple-key',
          '-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----',
          '--counter',
          '-1',
        ],
        /--counter must be/,
      ],
      [
        '--package without keys',
        () => [token, '--package', TEST_PACKAGE],
        /--package needs --decryption-key-file and --verification-key-file/,
      ],
      [
        'a key both inline and as a file',
        () => [
          token,
          '--package',
          TEST_PACKAGE,
          '--decryption-key',
          'AAAA',
          '--decryption-key-file',
          token,
          '--verification-key',
          'AAAA',
        ],
        /not both/,
      ],
      [
        'a key file that cannot be read',
        () => [
          token,
          '--package',
          TEST_PACKAGE,
          '--decryption-key-file',
          join(files.dir, 'nope'),
          '--verification-key',
          'AAAA',
        ],
        /--decryption-key-file: cannot read .*ENOENT/,
      ],
      [
        'a key file that is no key file',
        () => [
          token,
          '--package',
          TEST_PACKAGE,
          '--decryption-key-file',
          '/dev/zero',
          '--verification-key',
          'AAAA',
        ],
        /--decryption-key-file: \/dev\/zero is a character device, not a regular file/,
      ],
      [
        'a key file without --package',
        () => [token, '--app-id', TEST_APP_ID, '--verification-key-file', token],
        /--verification-key-file needs --package/,
      ],
      [
        '--nonce shorter than 16 bytes',
        () => [token, '--nonce', b64(randomBytes(15))],
        /--nonce must be 16 to 512 bytes.*got 15/,
      ],
      [
        '--nonce longer than 512 bytes',
        () => [token, '--nonce', b64(randomBytes(513))],
        /--nonce must be 16 to 512 bytes.*got 513/,
      ],
      [
        '--device-nonce longer than 128 bytes',
        () => [token, '--server-nonce', nonce, '--device-nonce', b64(randomBytes(129))],
        /--device-nonce must be 1 to 128 bytes/,
      ],
      [
        '--env without --apple-key',
        () => [token, '--app-id', TEST_APP_ID, '--env', 'development'],
        /--env needs --apple-key/,
      ],
      [
        '--env that is no environment',
        () => [token, '--app-id', TEST_APP_ID, '--env', 'staging'],
        /invalid|Allowed choices/,
      ],
      [
        '--package with a short decryption key',
        () => [
          token,
          '--package',
          TEST_PACKAGE,
          '--decryption-key',
          'AAAA',
          '--verification-key',
          'AAAA',
        ],
        /./,
      ],
      [
        'an --app-id that is not TEAMID.bundle.id',
        () => [token, '--app-id', 'com.example.app'],
        /--app-id "com.example.app" is not TEAMID.bundle.id/,
      ],
      ['an unknown flag', () => [token, '--nonse', nonce], /unknown option/],
      ['no token argument', () => [], /give the TOKEN file to check/],
    ] as const)('%s', async (_name, args, message) => {
      const run = await verifyFile([...args(), '--json'], { ...env, ATTEST_DATA_DIR: dataDir });
      expect(run.code).toBe(2);
      expect(run.stdout).toBe('');
      const lines = run.stderr.split('\n').filter(Boolean);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/^attest: /);
      expect(lines[0]).toMatch(message);
    });
  });

  it('--help shows examples whose flags the command accepts', async () => {
    const help = await verifyFile(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('Examples:');
    const appIds = [...help.stdout.matchAll(/--app-id ([A-Z0-9]\S+)/g)].map((m) => m[1]!);
    expect(appIds.length).toBeGreaterThan(0);
    const token = files.file(await registration(randomBytes(32)));
    for (const appId of appIds) {
      const run = await verifyFile([token, '--at', AT, '--app-id', appId, '--json'], env);
      expect({ appId, code: run.code, stderr: run.stderr }).toEqual({ appId, code: 1, stderr: '' });
      expect(run.json!.reason).toBe('apple_app_not_allowed');
    }
  });

  it('exits 3 with one line when the database cannot be reached', async () => {
    const token = files.file(await registration(randomBytes(32)));
    const run = await verifyFile([token, '--json'], {
      ...env,
      DATABASE_URL: 'postgres://postgres@127.0.0.1:1/attest',
    });
    expect(run.code).toBe(3);
    expect(run.stdout).toBe('');
    expect(run.stderr.split('\n').filter(Boolean)).toEqual([
      expect.stringMatching(/^attest: cannot reach the database at .*; check DATABASE_URL/),
    ]);
  });

  // -------------------------------------------------------------------------------------------

  describe('database mode (ATTEST_DATA_DIR): read-only, and the server agrees', () => {
    const OTHER_PACKAGE = 'com.example.other';
    const RETIRED_APP = 'ZYXWV98765.com.example.retired';
    let dataDir: string;
    let dbEnv: Record<string, string>;
    let apiKey: string;
    const sessionNonce = randomBytes(32);
    let before: Record<string, unknown[]>;
    let otherPackageKeys: GoogleTestKeys;
    // K1 registered with counter 5; K3 for an app no longer allowlisted; K4 a Development key
    let k1: DeviceKey;
    let k3: DeviceKey;
    let k4: DeviceKey;

    const open = () => openDatabase({ dataDir, role: 'cli' });

    async function snapshot(handle: DatabaseHandle) {
      const out: Record<string, unknown[]> = {};
      for (const [table, order] of [
        ['apple_keys', 'key_id'],
        ['attestation_sessions', 'reference'],
        ['apple_apps', 'app_id'],
        ['android_packages', 'package_name'],
        ['android_key_pairs', 'package_name, id'],
        ['api_keys', 'id'],
      ] as const) {
        out[table] = rowsOf(
          await handle.db.execute(sql.raw(`select * from ${table} order by ${order}`)),
        );
      }
      return out;
    }

    beforeAll(async () => {
      dataDir = join(files.dir, 'data');
      dbEnv = { ...env, ATTEST_DATA_DIR: dataDir, ATTEST_MASTER_KEY: TEST_MASTER_KEY_ENV };
      otherPackageKeys = await createGoogleTestKeys();
      [k1, k3, k4] = await Promise.all([createDeviceKey(), createDeviceKey(), createDeviceKey()]);
      const handle = await open();
      try {
        await runMigrations(handle);
        const issued = await issueKey(handle);
        apiKey = issued.key;
        await createSessionRepository(handle.db).create({
          reference: 'session-of-the-seed',
          apiKeyId: issued.id,
          serverNonce: sessionNonce,
          ttlSeconds: 86_400,
        });
        const allowlist = createAllowlistRepository(handle.db, TEST_SECRETS);
        await allowlist.addApple(TEST_APP_ID, 'production');
        await allowlist.addAndroid(TEST_PACKAGE, keyPairOf(google), {
          certificateDigests: [TEST_CERT_DIGEST],
        });
        await allowlist.addAndroid(OTHER_PACKAGE, keyPairOf(otherPackageKeys), {});
        const keys = createAppleKeyRepository(handle.db);
        await keys.register({
          keyId: k1.keyId,
          publicKey: k1.spki,
          appId: TEST_APP_ID,
          environment: 'Production',
          counter: 5,
        });
        await keys.register({
          keyId: k3.keyId,
          publicKey: k3.spki,
          appId: RETIRED_APP,
          environment: 'Production',
          counter: 2,
        });
        await keys.register({
          keyId: k4.keyId,
          publicKey: k4.spki,
          appId: TEST_APP_ID,
          environment: 'Development',
          counter: 0,
        });
        before = await snapshot(handle);
      } finally {
        await handle.close();
      }
    }, 60_000);

    interface Case {
      name: string;
      token: Buffer;
      /** the final nonce, and how it is given to verify-file */
      nonce: Uint8Array;
      flags: string[];
      expect: { valid: true; counter?: number } | { valid: false; reason: string; hints: string[] };
    }
    const cases: Case[] = [];
    const results = new Map<string, VerifyFileJson>();

    beforeAll(async () => {
      const assertion = (device: DeviceKey, counter: number, appId = TEST_APP_ID) => {
        const nonce = randomBytes(32);
        return {
          nonce,
          token: encodeAppleToken({
            nonce,
            keyId: device.keyId,
            assertion: createAssertion(device, { nonce, counter, appId }).assertion,
          }),
        };
      };
      const attestation = async (
        device: DeviceKey,
        environment: 'Production' | 'Development',
        nonce: Uint8Array = randomBytes(32),
      ) => ({
        nonce,
        token: encodeAppleToken({
          nonce,
          keyId: device.keyId,
          attestation: (await createAttestation(ca, device, { nonce, environment })).attestation,
        }),
      });
      const gms = async (keys: GoogleTestKeys) => {
        const nonce = randomBytes(32);
        return {
          nonce,
          token: gmsToken({
            nonce,
            packageName: TEST_PACKAGE,
            integrityToken: await mintIntegrityToken({
              keys,
              nonce,
              now: new Date(TEST_NOW.getTime() - 30_000),
            }),
          }),
        };
      };
      const withNonce = (c: { nonce: Uint8Array; token: Buffer }) => ({
        ...c,
        flags: ['--nonce', b64(c.nonce)],
      });

      const registrationWithSession = await attestation(
        await createDeviceKey(),
        'Production',
        sessionNonce,
      );
      cases.push(
        {
          name: 'registration of a new key (session nonce)',
          ...registrationWithSession,
          flags: ['--server-nonce', b64(sessionNonce)],
          expect: { valid: true, counter: 0 },
        },
        {
          name: 'assertion with counter 6 over stored 5',
          ...withNonce(assertion(k1, 6)),
          expect: { valid: true, counter: 6 },
        },
        {
          name: 'assertion with counter 5 over stored 5',
          ...withNonce(assertion(k1, 5)),
          expect: { valid: false, reason: 'apple_counter_replay', hints: ['counter_replay'] },
        },
        {
          name: 'registration of a registered key',
          ...withNonce(await attestation(k1, 'Production')),
          expect: { valid: false, reason: 'apple_key_registered', hints: [] },
        },
        {
          name: 'a Development attestation, app allowed for production',
          ...withNonce(await attestation(await createDeviceKey(), 'Development')),
          expect: {
            valid: false,
            reason: 'apple_environment_not_allowed',
            hints: ['environment_not_allowed'],
          },
        },
        {
          name: 'an assertion of a Development key, app now production-only',
          ...withNonce(assertion(k4, 1)),
          expect: {
            valid: false,
            reason: 'apple_app_not_allowed',
            hints: ['environment_not_allowed'],
          },
        },
        {
          name: 'an assertion of a key whose app left the allowlist',
          ...withNonce(assertion(k3, 3, RETIRED_APP)),
          expect: { valid: false, reason: 'apple_app_not_allowed', hints: ['app_not_allowlisted'] },
        },
        {
          name: "an assertion whose rpIdHash is another app's",
          ...withNonce(assertion(k1, 9, RETIRED_APP)),
          expect: { valid: false, reason: 'apple_app_not_allowed', hints: [] },
        },
        {
          name: 'a Play Integrity token',
          ...withNonce(await gms(google)),
          expect: { valid: true },
        },
        {
          name: "a Play Integrity token sealed with another package's keys",
          ...withNonce(await gms(otherPackageKeys)),
          expect: { valid: false, reason: 'gms_decrypt_failed', hints: ['other_package_keys'] },
        },
        {
          name: 'a Play Integrity token sealed with unknown keys',
          ...withNonce(await gms(await createGoogleTestKeys())),
          expect: { valid: false, reason: 'gms_decrypt_failed', hints: [] },
        },
      );

      for (const c of cases) {
        const run = await verifyFile(
          [files.file(c.token), '--at', AT, '--json', ...c.flags],
          dbEnv,
        );
        expect(run.stderr, c.name).toBe('');
        results.set(c.name, run.json!);
        // the same run again: nothing was stored, so the same verdict
        if (
          c.name.startsWith('assertion with counter 6') ||
          c.name.startsWith('registration of a new key')
        ) {
          const again = await verifyFile(
            [files.file(c.token), '--at', AT, '--json', ...c.flags],
            dbEnv,
          );
          expect(again.json, `${c.name} (again)`).toEqual(run.json);
        }
      }
    }, 300_000);

    it('gives the expected verdicts and hints', () => {
      for (const c of cases) {
        const json = results.get(c.name)!;
        expect(json.source, c.name).toBe('database');
        expect(json.trustRoots).toBe('ATTEST_APPLE_ROOT_CA');
        expectCoherent(json);
        if (c.expect.valid) {
          expect({ name: c.name, valid: json.valid, hints: json.hints }).toEqual({
            name: c.name,
            valid: true,
            hints: [],
          });
          if (c.expect.counter !== undefined)
            expect(json.details).toMatchObject({
              appleTokenDetails: { assertionCounter: c.expect.counter },
            });
        } else {
          expect({
            name: c.name,
            valid: json.valid,
            reason: json.reason,
            hints: json.hints.map((h) => h.code),
          }).toEqual({
            name: c.name,
            valid: false,
            reason: c.expect.reason,
            hints: c.expect.hints,
          });
        }
      }
      expect(
        results.get("a Play Integrity token sealed with another package's keys")!.hints[0]!.message,
      ).toContain(OTHER_PACKAGE);
    });

    it('changed nothing: keys, counters, sessions, allowlist and API keys are as seeded', async () => {
      const handle = await open();
      try {
        const after = await snapshot(handle);
        expect(after).toEqual(before);
        expect(after.apple_keys).toHaveLength(3);
        expect((after.attestation_sessions![0] as { consumed_at: unknown }).consumed_at).toBeNull();
      } finally {
        await handle.close();
      }
    });

    it('agrees with the server (sessionless, same instant, same database)', async () => {
      const handle = await open();
      try {
        const allowlist = createCachedAllowlist(
          createAllowlistRepository(handle.db, TEST_SECRETS),
          { ttlMs: 0 },
        );
        const verifiers = buildVerifiers({
          allowlist,
          appleKeys: createAppleKeyRepository(handle.db),
          appleRoots: ca.roots,
        });
        const service = createTestService(handle, {
          verify: (input) => verifyToken(input, { now: () => TEST_NOW, verifiers }),
        });
        for (const c of cases) {
          const res = await verify(service.app, apiKey, {
            attestationToken: b64(c.token),
            expectedNonce: b64(c.nonce),
          });
          const body = (await res.json()) as { isValid: boolean };
          const cli = results.get(c.name)!;
          expect({
            name: c.name,
            isValid: body.isValid,
            reason: service.logs.last().reason,
          }).toEqual({ name: c.name, isValid: cli.valid, reason: cli.reason });
        }
        // the server did register and count: the CLI never had
        expect((await createAppleKeyRepository(handle.db).find(k1.keyId))?.counter).toBe(6);
      } finally {
        await handle.close();
      }
    });
  });
});
