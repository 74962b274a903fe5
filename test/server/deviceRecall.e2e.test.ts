// Play device recall writes over HTTP: the route, the real allowlist (with the package's service
// account) in the database, the real Google client against the local fake Google, on PGlite and
// PostgreSQL. The RP verifies a token, then marks its device; what Google is sent, what the RP is
// answered and what the log line says (never the token) are checked for each way it can end.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { defaultAppleRoots } from '../../src/core/apple/trustRoots.js';
import {
  createTestPlayKeys,
  sealIntegrityToken,
  verdictPayload,
} from '../../src/core/dev/playIntegrityMint.js';
import { KeyCache } from '../../src/core/gms/keyCache.js';
import { buildVerifiers } from '../../src/core/verifiers.js';
import { verifyToken } from '../../src/core/verify.js';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import { createCachedAllowlist } from '../../src/db/cachedAllowlist.js';
import { createAppleKeyRepository } from '../../src/db/appleKeys.js';
import {
  createPlayIntegrityClient,
  type PlayIntegrityClientOptions,
} from '../../src/upstream/playIntegrityClient.js';
import { createDeviceRecallWrite } from '../../src/server/deviceRecall.js';
import { startServer } from '../../src/server/start.js';
import { encodeEnvelope } from '../../src/core/envelope.js';
import { backends, postgresBackend, useDatabase } from '../support/databases.js';
import { TEST_MASTER_KEY_ENV, TEST_SECRETS } from '../support/secrets.js';
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
import { BASE, captureLogger, createTestService, issueKey, verify } from '../support/service.js';
import { standardPayload } from '../support/standardPayload.js';
import { token as appleToken } from '../support/tokens.js';

const NOW = new Date();
const OTHER_PACKAGE = 'com.example.other';
const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');

/** a format-1 `gms` token; `request` "standard" for a standard request */
function gmsToken(
  nonce: Uint8Array,
  integrityToken: string,
  request: 'standard' | 'classic' = 'classic',
  packageName = TEST_PACKAGE,
): string {
  return b64(
    encodeEnvelope({
      nonce,
      service: 'gms',
      evidence: new Map<string, unknown>([
        ['packageName', packageName],
        ['integrityToken', integrityToken],
        ['request', request],
      ]),
    }),
  );
}

let pair: GoogleTestKeys;
let otherPair: GoogleTestKeys;
let sa: TestServiceAccount;
beforeAll(async () => {
  pair = await createGoogleTestKeys('pair-recall');
  otherPair = await createGoogleTestKeys('pair-other');
  sa = createTestServiceAccount();
});

describe.each(backends())('POST /api/v1/android/device-recall on $name', (backend) => {
  const db = useDatabase(backend);
  let key: string;
  let keyId: string;
  let fake: FakeGoogle;
  let service: ReturnType<typeof serviceWith>;

  beforeEach(async () => {
    ({ key, id: keyId } = await issueKey(db));
    const repo = createAllowlistRepository(db.db, TEST_SECRETS);
    await repo.addAndroid(TEST_PACKAGE, keyPairOf(pair), {
      certificateDigests: [TEST_CERT_DIGEST],
      serviceAccount: sa.account,
    });
    // allowlisted, but without a service account: Google's write cannot be authorized
    await repo.addAndroid(OTHER_PACKAGE, keyPairOf(otherPair), {});
    fake = await startFakeGoogle({ accounts: [sa] });
    service = serviceWith();
  });
  afterEach(async () => {
    await fake.close();
  });

  function serviceWith(client: Partial<PlayIntegrityClientOptions> = {}) {
    const allowlist = createCachedAllowlist(createAllowlistRepository(db.db, TEST_SECRETS), {
      ttlMs: 0,
    });
    const google = createPlayIntegrityClient({
      oauthUrl: fake.oauthUrl,
      playIntegrityUrl: fake.playIntegrityUrl,
      timeoutMs: 2000,
      maxInFlight: 8,
      ...client,
    });
    const verifiers = buildVerifiers({
      allowlist,
      appleKeys: createAppleKeyRepository(db.db),
      appleRoots: defaultAppleRoots(),
      googleDecoder: google,
    });
    return createTestService(db, {
      verify: (input) => verifyToken(input, { now: () => NOW, verifiers }),
      deviceRecall: createDeviceRecallWrite({ allowlist, keyCache: new KeyCache(), google }),
    });
  }

  function write(body: unknown, headers: Record<string, string> = {}) {
    return service.app.request(`${BASE}/api/v1/android/device-recall`, {
      method: 'POST',
      headers: { 'X-Api-Key': key, 'Content-Type': 'application/json', ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
  }

  /** a classic token of `keys`' package, as the device sends it */
  async function classic(keys = pair, packageName = TEST_PACKAGE) {
    const nonce = randomBytes(32);
    const integrityToken = await mintIntegrityToken({
      keys,
      nonce,
      now: NOW,
      packageName,
    });
    return {
      nonce,
      integrityToken,
      attestationToken: gmsToken(nonce, integrityToken, 'classic', packageName),
    };
  }

  /** the log must never hold the token, in any spelling */
  function expectNoToken(...secrets: string[]) {
    const text = service.logs.raw.join('\n');
    for (const secret of secrets) expect(text).not.toContain(secret);
  }

  it('verify, then mark the device: Google is asked to write the bits for that token', async () => {
    const { nonce, integrityToken, attestationToken } = await classic();
    const verified = await verify(service.app, key, {
      attestationToken,
      expectedNonce: b64(nonce),
    });
    expect(await verified.json()).toMatchObject({ isValid: true });

    const res = await write({ attestationToken, bits: { bitFirst: true, bitThird: false } });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ written: true });
    expect(fake.recallWrites).toEqual([
      {
        packageName: TEST_PACKAGE,
        integrityToken,
        // only the bits given: Google leaves the others as they are
        newValues: { bitFirst: true, bitThird: false },
      },
    ]);
    expect(fake.lastAssertion?.claims.iss).toBe(sa.account.clientEmail);
    expect(service.logs.last()).toMatchObject({
      route: '/api/v1/android/device-recall',
      status: 200,
      apiKeyId: keyId,
      service: 'gms',
      packageName: TEST_PACKAGE,
      recallBits: 'first=true,third=false',
      written: true,
    });
    expectNoToken(integrityToken, attestationToken);
  });

  it('writes for a standard-request token, which Google authenticates', async () => {
    const nonce = randomBytes(32);
    const integrityToken = fake.issue(TEST_PACKAGE, standardPayload({ nonce, now: NOW }));
    const res = await write({
      attestationToken: gmsToken(nonce, integrityToken, 'standard'),
      bits: { bitSecond: true },
    });
    expect(await res.json()).toEqual({ written: true });
    expect(fake.recallWrites).toEqual([
      { packageName: TEST_PACKAGE, integrityToken, newValues: { bitSecond: true } },
    ]);
    expectNoToken(integrityToken);
  });

  it('a test key never writes recall bits: not on a real device (a token of the live pair), nor on a minted one; Google is never called', async () => {
    const repo = createAllowlistRepository(db.db, TEST_SECRETS);
    const ensured = await repo.ensureTestPair(TEST_PACKAGE, async () => createTestPlayKeys());
    const nonce = randomBytes(32);
    const integrityToken = await sealIntegrityToken(
      ensured!.pair,
      verdictPayload({
        packageName: TEST_PACKAGE,
        nonce,
        issuedAt: NOW,
        deviceVerdicts: ['MEETS_DEVICE_INTEGRITY'],
        recognition: 'PLAY_RECOGNIZED',
        certificateDigests: [TEST_CERT_DIGEST],
      }),
    );
    const minted = { attestationToken: gmsToken(nonce, integrityToken), bits: { bitFirst: true } };
    const real = { attestationToken: (await classic()).attestationToken, bits: { bitFirst: true } };
    // a live key: the minted token does not open with the live pair
    expect(await (await write(minted)).json()).toEqual({ written: false });
    expect(service.logs.last()).toMatchObject({ reason: 'gms_decrypt_failed' });
    expect(fake.recallRequests).toBe(0);

    // a test key, even one scoped to the package: nothing on either
    key = (await issueKey(db, { mode: 'test', apps: [TEST_PACKAGE] })).key;
    for (const body of [real, minted]) {
      expect(await (await write(body)).json()).toEqual({ written: false });
      expect(service.logs.last()).toMatchObject({
        reason: 'recall_needs_live_key',
        written: false,
        mode: 'test',
      });
    }
    expect(fake.recallRequests).toBe(0);

    // the live key still writes the real device's bits
    key = (await issueKey(db, {})).key;
    expect(await (await write(real)).json()).toEqual({ written: true });
    expect(fake.recallRequests).toBe(1);
  });

  it('a key scoped to other apps writes nothing for this package; one scoped to it does', async () => {
    const { attestationToken } = await classic();
    const body = { attestationToken, bits: { bitFirst: true } };
    key = (await issueKey(db, { apps: [OTHER_PACKAGE] })).key;
    expect(await (await write(body)).json()).toEqual({ written: false });
    expect(service.logs.last()).toMatchObject({
      packageName: TEST_PACKAGE,
      reason: 'app_not_in_key_scope',
      written: false,
    });
    expect(fake.recallRequests).toBe(0);

    key = (await issueKey(db, { apps: [TEST_PACKAGE] })).key;
    expect(await (await write(body)).json()).toEqual({ written: true });
    expect(fake.recallRequests).toBe(1);
  });

  describe('the read side: --deny-recall-bits over HTTP', () => {
    /** verifies a standard token whose verdict is Google's example (bits first and third set) */
    async function verifyStandard() {
      const nonce = randomBytes(32);
      const integrityToken = fake.issue(TEST_PACKAGE, standardPayload({ nonce, now: NOW }));
      const res = await verify(service.app, key, {
        attestationToken: gmsToken(nonce, integrityToken, 'standard'),
        expectedNonce: b64(nonce),
      });
      return (await res.json()) as Record<string, unknown>;
    }
    const deny = (bits: ('first' | 'second' | 'third')[]) =>
      createAllowlistRepository(db.db, TEST_SECRETS).addAndroid(TEST_PACKAGE, null, {
        denyRecallBits: bits,
      });

    it('a denied bit set rejects the token, gms_device_recalled in the log', async () => {
      await deny(['third']);
      expect(await verifyStandard()).toEqual({ isValid: false, statusCode: 0 });
      expect(service.logs.last()).toMatchObject({
        isValid: false,
        reason: 'gms_device_recalled',
        packageName: TEST_PACKAGE,
      });
    });

    it('bits set that the package does not deny pass, and the RP sees them', async () => {
      await deny(['second']);
      expect(await verifyStandard()).toMatchObject({
        isValid: true,
        googleTokenDetails: {
          deviceRecall: { bitFirst: true, bitSecond: false, bitThird: true },
        },
      });
    });
  });

  describe('nothing is sent to Google, and the answer is written false', () => {
    it.each([
      [
        'a token that is not Play Integrity',
        async () => b64(appleToken(randomBytes(32))),
        'service_unsupported',
      ],
      ['bytes that are not a token', async () => b64(randomBytes(40)), 'token_malformed'],
      [
        'a package that is not allowlisted',
        async () => {
          const nonce = randomBytes(32);
          return gmsToken(nonce, 'whatever', 'standard', 'com.example.unknown');
        },
        'gms_package_not_allowed',
      ],
      [
        'a package without a service account',
        async () => (await classic(otherPair, OTHER_PACKAGE)).attestationToken,
        'gms_standard_not_configured',
      ],
      [
        'a classic token not sealed with the package keys',
        async () => {
          const nonce = randomBytes(32);
          return gmsToken(nonce, await mintIntegrityToken({ keys: otherPair, nonce, now: NOW }));
        },
        'gms_decrypt_failed',
      ],
      [
        'a classic token whose verdict names another package',
        async () => {
          const nonce = randomBytes(32);
          return gmsToken(
            nonce,
            await mintIntegrityToken({ keys: pair, nonce, now: NOW, packageName: OTHER_PACKAGE }),
          );
        },
        'gms_package_mismatch',
      ],
    ])('%s', async (_name, build, reason) => {
      const attestationToken = await build();
      const res = await write({ attestationToken, bits: { bitFirst: true } });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ written: false });
      expect(fake.recallRequests).toBe(0);
      expect(fake.counts.token).toBe(0);
      expect(service.logs.last()).toMatchObject({
        status: 200,
        apiKeyId: keyId,
        written: false,
        reason,
        recallBits: 'first=true',
      });
      expectNoToken(attestationToken);
    });
  });

  describe('Google does not write: written false, with its status in the log', () => {
    it.each([
      [400, 'INVALID_ARGUMENT'],
      [403, 'PERMISSION_DENIED'],
      [404, 'NOT_FOUND'],
      [429, 'RESOURCE_EXHAUSTED'],
      [500, 'INTERNAL'],
      [503, 'UNAVAILABLE'],
    ])('HTTP %i', async (status, googleName) => {
      const { integrityToken, attestationToken } = await classic();
      fake.faultNext('recall', { status });
      const res = await write({ attestationToken, bits: { bitFirst: true } });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ written: false });
      expect(fake.recallRequests).toBe(1);
      expect(fake.recallWrites).toEqual([]);
      const line = service.logs.last();
      expect(line).toMatchObject({
        written: false,
        reason: 'google_refused',
        googleStatus: status,
        packageName: TEST_PACKAGE,
      });
      expect(String(line.detail)).toContain(`HTTP ${status} ${googleName}`);
      expectNoToken(integrityToken, attestationToken);
    });

    it('Google quoting the token in its error message: the log keeps its status and code only', async () => {
      const { integrityToken, attestationToken } = await classic();
      fake.faultNext('recall', { status: 400, echo: true });
      const res = await write({ attestationToken, bits: { bitFirst: true } });
      expect(await res.json()).toEqual({ written: false });
      expect(fake.recallRequests).toBe(1);
      expect(service.logs.last()).toMatchObject({ reason: 'google_refused', googleStatus: 400 });
      expect(String(service.logs.last().detail)).toContain('HTTP 400 INVALID_ARGUMENT');
      expectNoToken(integrityToken, attestationToken);
    });

    it('Google silent past the deadline: the answer comes when the client gives up', async () => {
      service = serviceWith({ timeoutMs: 300 });
      const { integrityToken, attestationToken } = await classic();
      fake.faultNext('recall', { hang: true });
      const res = await write({ attestationToken, bits: { bitThird: true } });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ written: false });
      expect(fake.recallRequests).toBe(1);
      expect(service.logs.last()).toMatchObject({
        written: false,
        reason: 'google_timeout',
        packageName: TEST_PACKAGE,
      });
      expect(service.logs.last().durationMs).toBeLessThan(5000);
      expectNoToken(integrityToken, attestationToken);
    });

    it('one write more than the Google in-flight limit answers 503 with Retry-After, at once', async () => {
      service = serviceWith({ maxInFlight: 1 });
      const { attestationToken } = await classic();
      const gate = fake.gate();
      const first = write({ attestationToken, bits: { bitFirst: true } });
      await gate.arrived(1);
      const second = await write({ attestationToken, bits: { bitFirst: true } });
      expect(second.status).toBe(503);
      expect(second.headers.get('Retry-After')).toBe('1');
      expect(fake.recallRequests).toBe(1);
      gate.release();
      expect(await (await first).json()).toEqual({ written: true });
    });

    it('the OAuth grant refused: written false, no write attempted', async () => {
      const { attestationToken } = await classic();
      fake.faultNext('token', { status: 400 });
      const res = await write({ attestationToken, bits: { bitThird: true } });
      expect(await res.json()).toEqual({ written: false });
      expect(fake.recallRequests).toBe(0);
      expect(service.logs.last()).toMatchObject({ reason: 'google_oauth_refused' });
    });
  });

  describe('a malformed request is a 400 with the invalid-request statusCode', () => {
    let attestationToken: string;
    beforeEach(async () => {
      ({ attestationToken } = await classic());
    });
    it.each([
      ['not JSON', () => '{"attestationToken":', /not valid JSON/],
      ['an array', () => [], /JSON object/],
      ['no token', () => ({ bits: { bitFirst: true } }), /attestationToken/],
      [
        'a token that is not a string',
        () => ({ attestationToken: 5, bits: { bitFirst: true } }),
        /attestationToken/,
      ],
      [
        'a token that is not base64',
        () => ({ attestationToken: 'not base64!', bits: { bitFirst: true } }),
        /base64/,
      ],
      ['no bits', () => ({ attestationToken }), /bits/],
      ['bits naming none', () => ({ attestationToken, bits: {} }), /at least one/],
      [
        'a bit that is not a boolean',
        () => ({ attestationToken, bits: { bitFirst: 'yes' } }),
        /bits\.bitFirst/,
      ],
      [
        'a bit set to null',
        () => ({ attestationToken, bits: { bitSecond: null } }),
        /bits\.bitSecond/,
      ],
      ['a misspelled bit', () => ({ attestationToken, bits: { bitfirst: true } }), /only bitFirst/],
      ['bits as a list', () => ({ attestationToken, bits: ['first'] }), /bits/],
    ])('%s', async (_name, body, message) => {
      const res = await write(body());
      expect(res.status).toBe(400);
      const answer = (await res.json()) as { statusCode: number; errorMessage: string };
      expect(answer.statusCode).toBe(268505089);
      expect(answer.errorMessage).toMatch(message);
      expect(fake.recallRequests).toBe(0);
    });

    it('a body that is not JSON by its Content-Type', async () => {
      const res = await write(
        { attestationToken, bits: { bitFirst: true } },
        { 'Content-Type': 'text/plain' },
      );
      expect(res.status).toBe(400);
      expect(fake.recallRequests).toBe(0);
    });

    it('without an API key the route answers 401 and calls nobody', async () => {
      const res = await service.app.request(`${BASE}/api/v1/android/device-recall`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ attestationToken, bits: { bitFirst: true } }),
      });
      expect(res.status).toBe(401);
      expect(fake.recallRequests).toBe(0);
    });

    it('GET is not allowed', async () => {
      const res = await service.app.request(`${BASE}/api/v1/android/device-recall`, {
        headers: { 'X-Api-Key': key },
      });
      expect(res.status).toBe(405);
      expect(res.headers.get('Allow')).toBe('POST');
    });
  });
});

describe('startServer wires the device recall write to the configured Google', () => {
  it('writes over a real socket to ATTEST_GOOGLE_PLAY_INTEGRITY_URL and counts it in /metrics', async () => {
    const fake = await startFakeGoogle({ accounts: [sa] });
    const dir = mkdtempSync(join(tmpdir(), 'attest-recall-start-'));
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
        { serviceAccount: sa.account },
      );
      const integrityToken = fake.issue(
        TEST_PACKAGE,
        standardPayload({ nonce: randomBytes(32), now: new Date() }),
      );
      const res = await fetch(`${server.url}/api/v1/android/device-recall`, {
        method: 'POST',
        headers: { 'X-Api-Key': apiKey, 'Content-Type': 'application/json' },
        body: JSON.stringify({
          attestationToken: gmsToken(randomBytes(32), integrityToken, 'standard'),
          bits: { bitSecond: true },
        }),
      });
      expect(await res.json()).toEqual({ written: true });
      expect(fake.recallWrites).toEqual([
        { packageName: TEST_PACKAGE, integrityToken, newValues: { bitSecond: true } },
      ]);
      const metrics = await (await fetch(`${server.url}/metrics`)).text();
      expect(metrics).toContain('attest_google_requests_total{endpoint="recall",outcome="ok"} 1');
    } finally {
      await server.close();
      await fake.close();
      await pg?.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
