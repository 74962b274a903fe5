// Play Integrity standard requests end to end: HTTP app + real verifiers + the allowlist (with
// its service account) in the database + the real Google client against the local fake Google,
// on PGlite and PostgreSQL, in both approaches; classic tokens of the same package alongside.
// Faults (Google slow, 429, 5xx) are 500s and counted; the concurrency limit answers 503.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { defaultAppleRoots } from '../../src/core/apple/trustRoots.js';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import { TEST_MASTER_KEY_ENV, TEST_SECRETS } from '../support/secrets.js';
import {
  createPlayIntegrityClient,
  type PlayIntegrityClientOptions,
} from '../../src/upstream/playIntegrityClient.js';
import { startServer } from '../../src/server/start.js';
import { encodeEnvelope } from '../../src/core/envelope.js';
import { backends, postgresBackend, useDatabase, type TestDatabase } from '../support/databases.js';
import {
  createTestServiceAccount,
  startFakeGoogle,
  type FakeGoogle,
  type TestServiceAccount,
} from '../support/fakeGoogle.js';
import {
  createGoogleTestKeys,
  keyPairOf,
  mintIntegrityToken,
  TEST_CERT_DIGEST,
  TEST_PACKAGE,
  type GoogleTestKeys,
} from '../support/googleFactory.js';
import {
  captureLogger,
  createPlatformService,
  init,
  issueKey,
  verify,
  verifyInSession,
  verifySessionless,
} from '../support/service.js';
import { standardPayload, type StandardPayload } from '../support/standardPayload.js';

const NOW = new Date('2026-11-22T12:00:00Z');
const ISSUED = new Date(NOW.getTime() - 20_000);
const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');

/** a format-1 `gms` token; `request` "standard" for a standard request */
function gmsToken(
  nonce: Uint8Array,
  integrityToken: string,
  request?: 'standard' | 'classic',
): string {
  const gms = new Map<string, unknown>([
    ['packageName', TEST_PACKAGE],
    ['integrityToken', integrityToken],
  ]);
  if (request) gms.set('request', request);
  return b64(
    encodeEnvelope({ nonce, service: 'gms', evidence: gms, device: { model: 'Pixel 9' } }),
  );
}

let pair: GoogleTestKeys;
let sa: TestServiceAccount;
beforeAll(async () => {
  pair = await createGoogleTestKeys('pair-2026');
  sa = createTestServiceAccount();
});

describe.each(backends())('Play Integrity standard requests over HTTP on $name', (backend) => {
  const db = useDatabase(backend);
  let key: string;
  let fake: FakeGoogle;
  let service: ReturnType<typeof createPlatformService>;

  beforeEach(async () => {
    key = (await issueKey(db)).key;
    await createAllowlistRepository(db.db, TEST_SECRETS).addAndroid(TEST_PACKAGE, keyPairOf(pair), {
      certificateDigests: [TEST_CERT_DIGEST],
      serviceAccount: sa.account,
    });
    fake = await startFakeGoogle({ accounts: [sa] });
    service = serviceWith();
  });
  afterEach(async () => {
    await fake.close();
  });

  function serviceWith(client: Partial<PlayIntegrityClientOptions> = {}) {
    const s: ReturnType<typeof createPlatformService> = createPlatformService(db, {
      now: NOW,
      appleRoots: defaultAppleRoots(),
      googleDecoder: createPlayIntegrityClient({
        oauthUrl: fake.oauthUrl,
        playIntegrityUrl: fake.playIntegrityUrl,
        timeoutMs: 2000,
        maxInFlight: 8,
        onEvent: (e) => s.metrics.observeGoogle(e.endpoint, e.outcome),
        ...client,
      }),
    });
    return s;
  }

  type Mint = { edit?: (p: StandardPayload) => void; integrityToken?: string };

  /** the device side of a standard request over `finalNonce`: Google issues a token for its verdict */
  function standardToken(finalNonce: Uint8Array, mint: Mint) {
    return (
      mint.integrityToken ??
      fake.issue(
        TEST_PACKAGE,
        standardPayload({
          nonce: finalNonce,
          now: ISSUED,
          ...(mint.edit ? { edit: mint.edit } : {}),
        }),
      )
    );
  }

  async function sessionVerify(mint: Mint = {}, s = service) {
    const standard = (finalNonce: Buffer) =>
      gmsToken(finalNonce, standardToken(finalNonce, mint), 'standard');
    return (await verifyInSession(s.app, key, standard, randomBytes(16))).res;
  }

  async function sessionlessVerify(mint: Mint = {}, s = service) {
    return verifySessionless(
      s.app,
      key,
      (nonce) => gmsToken(nonce, standardToken(nonce, mint), 'standard'),
      randomBytes(32),
    );
  }

  const approaches = [
    ['session', sessionVerify],
    ['sessionless', sessionlessVerify],
  ] as const;

  it.each(approaches)(
    'accepts a standard token with the contract fields and the extensions (%s)',
    async (approach, run) => {
      const res = await run();
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({
        isValid: true,
        statusCode: 0,
        googleTokenDetails: {
          packageName: TEST_PACKAGE,
          deviceIntegrityVerdicts: ['MEETS_DEVICE_INTEGRITY'],
          timestampMillis: ISSUED.getTime(),
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
      expect(service.logs.last()).toMatchObject({
        status: 200,
        approach,
        service: 'gms',
        packageName: TEST_PACKAGE,
        isValid: true,
      });
      expect(fake.counts).toEqual({ token: 1, decode: 1 });
    },
  );

  it('accepts classic tokens of the same package alongside, in both approaches', async () => {
    const nonce = randomBytes(32);
    const sessionless = await verify(service.app, key, {
      attestationToken: gmsToken(
        nonce,
        await mintIntegrityToken({ keys: pair, nonce, now: ISSUED }),
        'classic',
      ),
      expectedNonce: b64(nonce),
    });
    expect(await sessionless.json()).toMatchObject({
      isValid: true,
      googleTokenDetails: { packageName: TEST_PACKAGE },
    });
    const { body } = await init(service.app, key);
    const serverNonce = Buffer.from(body.serverNonce, 'base64');
    const session = await verify(service.app, key, {
      attestationToken: gmsToken(
        serverNonce,
        await mintIntegrityToken({ keys: pair, nonce: serverNonce, now: ISSUED }),
      ),
      sessionReference: body.sessionReference,
    });
    expect(await session.json()).toMatchObject({
      isValid: true,
      googleTokenDetails: { packageName: TEST_PACKAGE },
    });
    expect(fake.counts.decode).toBe(0);
  });

  it('shares one access token across requests', async () => {
    for (let i = 0; i < 3; i++)
      expect(await (await sessionlessVerify()).json()).toMatchObject({ isValid: true });
    expect(fake.counts).toEqual({ token: 1, decode: 3 });
  });

  describe.each(approaches)('rejections, each with its logged reason (%s)', (_approach, run) => {
    it.each([
      [
        'a request hash over another nonce',
        {
          edit: (p: StandardPayload): void =>
            void (p.requestDetails.requestHash = randomBytes(32).toString('base64url')),
        },
        'gms_nonce_mismatch',
      ],
      [
        'a token Google did not issue',
        { integrityToken: 'forged-standard-token' },
        'gms_decode_rejected',
      ],
      [
        'an unrecognized app',
        {
          edit: (p: StandardPayload): void =>
            void (p.appIntegrity.appRecognitionVerdict = 'UNRECOGNIZED_VERSION'),
        },
        'gms_app_not_recognized',
      ],
      [
        'a stale verdict',
        {
          edit: (p: StandardPayload): void =>
            void (p.requestDetails.timestampMillis = String(NOW.getTime() - 601_000)),
        },
        'gms_token_stale',
      ],
    ] as const)('%s', async (_name, mint, reason) => {
      const res = await run(mint);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ isValid: false, statusCode: 0 });
      expect(service.logs.last()).toMatchObject({
        isValid: false,
        reason,
        service: 'gms',
        packageName: TEST_PACKAGE,
      });
    });

    it('a package without a service account: gms_standard_not_configured, Google never asked', async () => {
      await createAllowlistRepository(db.db, TEST_SECRETS).addAndroid(TEST_PACKAGE, null, {
        serviceAccount: null,
      });
      const res = await run();
      expect(await res.json()).toEqual({ isValid: false, statusCode: 0 });
      expect(service.logs.last()).toMatchObject({ reason: 'gms_standard_not_configured' });
      expect(fake.counts).toEqual({ token: 0, decode: 0 });
    });

    it("a key scoped to other apps: app_not_in_key_scope, Google never asked (no decode on this package's quota)", async () => {
      key = (await issueKey(db, { apps: ['com.example.other'] })).key;
      const res = await run();
      expect(await res.json()).toEqual({ isValid: false, statusCode: 0 });
      expect(service.logs.last()).toMatchObject({
        reason: 'app_not_in_key_scope',
        packageName: TEST_PACKAGE,
      });
      expect(fake.counts).toEqual({ token: 0, decode: 0 });
      // scoped to this package, the same request is decoded and valid
      key = (await issueKey(db, { apps: [TEST_PACKAGE] })).key;
      expect(await (await run()).json()).toMatchObject({ isValid: true });
      expect(fake.counts.decode).toBe(1);
    });

    it('the package policy on the newer verdicts, stored in the database, applies', async () => {
      await createAllowlistRepository(db.db, TEST_SECRETS).addAndroid(TEST_PACKAGE, null, {
        requireLicensed: true,
        maxDeviceActivity: 'LEVEL_1',
      });
      await run();
      expect(service.logs.last()).toMatchObject({ isValid: false, reason: 'gms_device_activity' });
      await createAllowlistRepository(db.db, TEST_SECRETS).addAndroid(TEST_PACKAGE, null, {
        maxDeviceActivity: 'LEVEL_3',
      });
      expect(await (await run()).json()).toMatchObject({ isValid: true });
      await run({ edit: (p) => void (p.accountDetails = { appLicensingVerdict: 'UNLICENSED' }) });
      expect(service.logs.last()).toMatchObject({ isValid: false, reason: 'gms_not_licensed' });
    });
  });

  describe('Google faults are 500s, never a verdict, counted and logged with the cause', () => {
    it.each([
      ['HTTP 503', { status: 503 }, 'server_error'],
      ['HTTP 429', { status: 429 }, 'rate_limited'],
      ['no answer', { hang: true }, 'timeout'],
    ] as const)('%s', async (_name, fault, code) => {
      const s = serviceWith({ timeoutMs: 300 });
      fake.faultNext('decode', fault);
      const res = await sessionlessVerify({}, s);
      expect(res.status).toBe(500);
      expect(await res.json()).toEqual({ statusCode: 268505088, errorMessage: 'Internal error' });
      const log = s.logs.last();
      expect(log).toMatchObject({ status: 500, err: { type: 'GoogleFault', code } });
      expect(log.isValid).toBeUndefined();
      expect(await s.metrics.registry.metrics()).toContain(
        `attest_google_requests_total{endpoint="decode",outcome="${code}"} 1`,
      );
    });

    it('Google quoting the token in its error message: no line of the log quotes it', async () => {
      const s = serviceWith({ timeoutMs: 300 });
      fake.faultNext('decode', { status: 400, echo: true });
      const res = await sessionlessVerify({}, s);
      expect(res.status).toBeGreaterThanOrEqual(200);
      const lines = s.logs.raw.join('\n');
      expect(lines).toContain('"status":');
      // every token the fake issues starts so; the fake's message held the whole request body
      expect(lines).not.toContain('fake-standard-');
      expect(lines).not.toContain('injected fault for');
    });

    it('a slow Google holds at most the limit: beyond it 503 with Retry-After', async () => {
      const s = serviceWith({ maxInFlight: 1 });
      const gate = fake.gate();
      const first = sessionlessVerify({}, s);
      await gate.arrived(1);
      const second = await sessionlessVerify({}, s);
      expect(second.status).toBe(503);
      expect(second.headers.get('Retry-After')).toBe('1');
      expect(await second.json()).toEqual({
        statusCode: 268505088,
        errorMessage: 'Busy, retry shortly',
      });
      gate.release();
      expect(await (await first).json()).toMatchObject({ isValid: true });
      expect(await s.metrics.registry.metrics()).toContain(
        'attest_google_requests_total{endpoint="decode",outcome="busy"} 1',
      );
    });
  });
});

describe('startServer wires the Google client from the configuration', () => {
  it('verifies a standard token over a real socket and counts the exchanges in /metrics', async () => {
    const fake = await startFakeGoogle({ accounts: [sa] });
    const dir = mkdtempSync(join(tmpdir(), 'attest-gms-start-'));
    // PostgreSQL when there is one (it starts faster than a fresh embedded database)
    const pg = await postgresBackend()?.open();
    const { logger } = captureLogger();
    const config = {
      ...loadConfig({}, {}),
      dataDir: dir,
      databaseUrl: pg?.url,
      port: 0,
      host: '127.0.0.1',
      googleOauthUrl: fake.oauthUrl,
      googlePlayIntegrityUrl: fake.playIntegrityUrl,
      masterKey: TEST_MASTER_KEY_ENV,
    };
    const server = await startServer(config, logger, { migrate: true });
    try {
      const apiKey = (await issueKey(server.database)).key;
      await createAllowlistRepository(server.database.db, TEST_SECRETS).addAndroid(
        TEST_PACKAGE,
        null,
        { certificateDigests: [TEST_CERT_DIGEST], serviceAccount: sa.account },
      );
      const nonce = randomBytes(32);
      const integrityToken = fake.issue(TEST_PACKAGE, standardPayload({ nonce, now: new Date() }));
      const res = await fetch(`${server.url}/api/v1/attestation/verify`, {
        method: 'POST',
        headers: { 'X-Api-Key': apiKey, 'Content-Type': 'application/json' },
        body: JSON.stringify({
          attestationToken: gmsToken(nonce, integrityToken, 'standard'),
          expectedNonce: b64(nonce),
        }),
      });
      expect(await res.json()).toMatchObject({
        isValid: true,
        googleTokenDetails: { packageName: TEST_PACKAGE, appLicensingVerdict: 'LICENSED' },
      });
      const metrics = await (await fetch(`${server.url}/metrics`)).text();
      expect(metrics).toContain('attest_google_requests_total{endpoint="token",outcome="ok"} 1');
      expect(metrics).toContain('attest_google_requests_total{endpoint="decode",outcome="ok"} 1');
    } finally {
      await server.close();
      await fake.close();
      await pg?.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
