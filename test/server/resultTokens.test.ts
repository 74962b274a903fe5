/**
 * Result tokens through the HTTP API: a key with result tokens gets a JWT on every valid verify
 * that jose verifies against the app's own /.well-known/jwks.json with exactly the contract's
 * claims; every other key's body is byte-for-byte the interface document's; no token, API key or
 * reason reaches a token or a log line.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, type JSONWebKeySet } from 'jose';
import { beforeEach, describe, expect, it } from 'vitest';
import { RESULT_TOKEN_TYPE } from '../../src/core/resultToken.js';
import { createResultKeyRepository } from '../../src/db/resultKeys.js';
import { STATUS_INTERNAL_ERROR } from '../../src/server/errorBody.js';
import { createResultTokenSigner } from '../../src/server/resultTokenSigner.js';
import { backends, useDatabase } from '../support/databases.js';
import { TEST_SECRETS } from '../support/secrets.js';
import { BASE, createTestService, init, issueKey, verify } from '../support/service.js';
import { appleEvidence, b64, FAKE_APP_ID, token } from '../support/tokens.js';

const ISSUER = 'https://attest.example.com';
const KEY_ID_BYTES = new Uint8Array(32).fill(7);
const DETAILS = {
  keyIdentifier: Buffer.from(KEY_ID_BYTES).toString('base64'),
  appId: FAKE_APP_ID,
  environment: 'Production',
  assertionCounter: 1,
  platform: 'iOS',
};
const CLAIMS = [
  'iss',
  'aud',
  'sub',
  'iat',
  'exp',
  'jti',
  'service',
  'approach',
  'nonce',
  'details',
];
const sha256url = (b: Uint8Array) => createHash('sha256').update(b).digest('base64url');

describe.each(backends())('result tokens on $name', (backend) => {
  const db = useDatabase(backend);
  let plain: { id: string; key: string };
  let tokens: { id: string; key: string };
  let service: ReturnType<typeof createTestService>;
  let bare: ReturnType<typeof createTestService>;
  let signer: ReturnType<typeof createResultTokenSigner>;

  beforeEach(async () => {
    plain = await issueKey(db, { name: 'plain' });
    tokens = await issueKey(db, { name: 'tokens', resultTokens: true });
    signer = createResultTokenSigner({
      keys: createResultKeyRepository(db.db, TEST_SECRETS),
      issuer: ISSUER,
      ttlSeconds: 300,
      refreshMs: 5000,
    });
    service = createTestService(db, { resultTokens: signer });
    // a server started without ATTEST_ISSUER
    bare = createTestService(db);
  });

  const jwksOf = async (app = service.app) => {
    const res = await app.request(`${BASE}/.well-known/jwks.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('max-age=300');
    return (await res.json()) as JSONWebKeySet;
  };
  const sessionless = async (key: string, nonce = randomBytes(32), app = service.app) => {
    const res = await verify(app, key, {
      attestationToken: b64(token(nonce)),
      expectedNonce: nonce.toString('base64'),
    });
    return { res, text: await res.text(), nonce };
  };

  it('a valid verify carries a token that jose verifies against /.well-known/jwks.json with the contract claims', async () => {
    const before = Math.floor(Date.now() / 1000);
    const { res, text, nonce } = await sessionless(tokens.key);
    expect(res.status).toBe(200);
    const body = JSON.parse(text) as Record<string, unknown>;
    expect(Object.keys(body)).toEqual([
      'isValid',
      'statusCode',
      'appleTokenDetails',
      'resultToken',
    ]);
    expect(body).toMatchObject({ isValid: true, statusCode: 0, appleTokenDetails: DETAILS });
    const jwt = body.resultToken as string;

    const { payload, protectedHeader } = await jwtVerify(jwt, createLocalJWKSet(await jwksOf()), {
      issuer: ISSUER,
      audience: tokens.id,
      algorithms: ['ES256'],
      typ: RESULT_TOKEN_TYPE,
    });
    expect(protectedHeader).toEqual({
      alg: 'ES256',
      typ: 'attest-result+jwt',
      kid: expect.any(String),
    });
    expect(Object.keys(payload)).toEqual(CLAIMS);
    expect(payload).toMatchObject({
      iss: ISSUER,
      aud: tokens.id,
      sub: DETAILS.keyIdentifier,
      service: 'apple',
      approach: 'sessionless',
      nonce: sha256url(nonce),
      details: body.appleTokenDetails,
    });
    expect(payload.iat).toBeGreaterThanOrEqual(before);
    expect(payload.exp! - payload.iat!).toBe(300);
    expect(payload.jti).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('the session approach: nonce is SHA-256 of the final nonce (server nonce + device nonce)', async () => {
    const { body } = await init(service.app, tokens.key);
    const serverNonce = Buffer.from(body.serverNonce, 'base64');
    const deviceNonce = randomBytes(16);
    const final = Buffer.concat([serverNonce, deviceNonce]);
    const res = await verify(service.app, tokens.key, {
      attestationToken: b64(token(final)),
      sessionReference: body.sessionReference,
      deviceNonce: deviceNonce.toString('base64'),
    });
    const { resultToken } = (await res.json()) as { resultToken: string };
    const { payload } = await jwtVerify(resultToken, createLocalJWKSet(await jwksOf()), {
      issuer: ISSUER,
      audience: tokens.id,
    });
    expect(payload).toMatchObject({ approach: 'session', nonce: sha256url(final) });
  });

  it('jti is unique per token, and a token made for one key is refused for another audience', async () => {
    const a = JSON.parse((await sessionless(tokens.key)).text) as { resultToken: string };
    const b = JSON.parse((await sessionless(tokens.key)).text) as { resultToken: string };
    const jwks = createLocalJWKSet(await jwksOf());
    const [pa, pb] = await Promise.all(
      [a, b].map(async (t) => (await jwtVerify(t.resultToken, jwks)).payload),
    );
    expect(pa!.jti).not.toBe(pb!.jti);
    await expect(jwtVerify(a.resultToken, jwks, { audience: plain.id })).rejects.toThrow(/aud/);
  });

  it('a plain key answers byte-for-byte the interface body, with the signer present or not', async () => {
    const expected = JSON.stringify({ isValid: true, statusCode: 0, appleTokenDetails: DETAILS });
    expect((await sessionless(plain.key)).text).toBe(expected);
    expect((await sessionless(plain.key, randomBytes(32), bare.app)).text).toBe(expected);
  });

  it('a rejection never carries a token', async () => {
    const nonce = randomBytes(32);
    const res = await verify(service.app, tokens.key, {
      attestationToken: b64(
        token(nonce, { evidence: appleEvidence(KEY_ID_BYTES, Buffer.from('bad')) }),
      ),
      expectedNonce: nonce.toString('base64'),
    });
    expect(await res.text()).toBe('{"isValid":false,"statusCode":0}');
  });

  it('neither the token, the API key, the attestation token nor a reason reaches a result token or the log', async () => {
    service.logs.clear();
    const nonce = randomBytes(32);
    const attestationToken = b64(token(nonce));
    const res = await verify(service.app, tokens.key, {
      attestationToken,
      expectedNonce: nonce.toString('base64'),
    });
    const { resultToken } = (await res.json()) as { resultToken: string };
    const [h, p] = resultToken.split('.');
    const decoded =
      Buffer.from(h!, 'base64url').toString() + Buffer.from(p!, 'base64url').toString();
    for (const secret of [
      tokens.key,
      tokens.key.slice(tokens.key.indexOf('_') + 17),
      attestationToken,
    ])
      expect(decoded).not.toContain(secret);
    expect(decoded).not.toMatch(/reason|detail"/);
    // a rejected verify's reason stays in the log only
    await verify(service.app, tokens.key, {
      attestationToken: b64(
        token(nonce, { evidence: appleEvidence(KEY_ID_BYTES, Buffer.from('x')) }),
      ),
      expectedNonce: nonce.toString('base64'),
    });
    const log = service.logs.raw.join('\n');
    expect(service.logs.requests().at(-1)).toMatchObject({ reason: 'apple_signature_invalid' });
    for (const secret of [resultToken, p!, tokens.key, attestationToken])
      expect(log).not.toContain(secret);
  });

  it('/.well-known/openid-configuration names the issuer and the JWKS; both need no API key', async () => {
    const res = await service.app.request(`${BASE}/.well-known/openid-configuration`);
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('max-age=300');
    expect(await res.json()).toEqual({
      issuer: ISSUER,
      jwks_uri: `${ISSUER}/.well-known/jwks.json`,
    });
    // the key `serve` makes at start, before any token
    expect((await jwksOf()).keys).toEqual([]);
    await signer.ensureKey();
    const jwks = await jwksOf();
    expect(jwks.keys).toHaveLength(1);
    expect(jwks.keys[0]).toEqual({
      kty: 'EC',
      crv: 'P-256',
      x: expect.any(String),
      y: expect.any(String),
      kid: expect.any(String),
      alg: 'ES256',
      use: 'sig',
    });
    expect(JSON.stringify(jwks)).not.toMatch(/"d"/);
  });

  it("without ATTEST_ISSUER: the well-known routes are 404 and a result-token key's valid verify is 500, naming the cause in the log", async () => {
    for (const path of ['/.well-known/jwks.json', '/.well-known/openid-configuration'])
      expect((await bare.app.request(`${BASE}${path}`)).status).toBe(404);
    const { res, text } = await sessionless(tokens.key, randomBytes(32), bare.app);
    expect(res.status).toBe(500);
    expect(JSON.parse(text)).toMatchObject({ statusCode: STATUS_INTERNAL_ERROR });
    expect(JSON.stringify(bare.logs.last().err)).toMatch(/ATTEST_ISSUER/);
  });

  it('the kid in the header is a published key', async () => {
    const { text } = await sessionless(tokens.key);
    const { kid } = decodeProtectedHeader(
      (JSON.parse(text) as { resultToken: string }).resultToken,
    );
    expect((await jwksOf()).keys.map((k) => k.kid)).toContain(kid);
  });
});

describe.each(backends())('test-mode result tokens on $name', (backend) => {
  const db = useDatabase(backend);
  let live: ReturnType<typeof createResultTokenSigner>;
  let test: ReturnType<typeof createResultTokenSigner>;
  let service: ReturnType<typeof createTestService>;

  beforeEach(async () => {
    const keys = createResultKeyRepository(db.db, TEST_SECRETS);
    const options = { keys, issuer: ISSUER, ttlSeconds: 300, refreshMs: 5000 };
    live = createResultTokenSigner(options);
    test = createResultTokenSigner({ ...options, mode: 'test' });
    await live.ensureKey();
    await test.ensureKey();
    service = createTestService(db, {
      resultTokens: live,
      testResultTokens: test,
      testKeys: true,
    });
  });

  const jwksAt = async (path: string) => {
    const res = await service.app.request(`${BASE}${path}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('max-age=300');
    return (await res.json()) as JSONWebKeySet;
  };
  const tokenOf = async (key: string) => {
    const nonce = randomBytes(32);
    const res = await verify(service.app, key, {
      attestationToken: b64(token(nonce)),
      expectedNonce: nonce.toString('base64'),
    });
    expect(res.status).toBe(200);
    return ((await res.json()) as { resultToken: string }).resultToken;
  };

  it("a test key's token is signed by a test key: it does not verify against /.well-known/jwks.json, does against /.well-known/jwks-test.json, and says test: true", async () => {
    const key = await issueKey(db, { name: 'test', mode: 'test', resultTokens: true });
    const jwt = await tokenOf(key.key);
    const liveJwks = await jwksAt('/.well-known/jwks.json');
    const testJwks = await jwksAt('/.well-known/jwks-test.json');
    // two disjoint key sets
    expect(liveJwks.keys).toHaveLength(1);
    expect(testJwks.keys).toHaveLength(1);
    expect(liveJwks.keys[0]!.kid).not.toBe(testJwks.keys[0]!.kid);

    const options = { issuer: ISSUER, audience: key.id, algorithms: ['ES256'] };
    await expect(jwtVerify(jwt, createLocalJWKSet(liveJwks), options)).rejects.toMatchObject({
      code: 'ERR_JWKS_NO_MATCHING_KEY',
    });
    const { payload } = await jwtVerify(jwt, createLocalJWKSet(testJwks), options);
    expect(Object.keys(payload)).toEqual([...CLAIMS, 'test']);
    expect(payload.test).toBe(true);
  });

  it("a live key's token is signed by a live key and carries no test claim", async () => {
    const key = await issueKey(db, { name: 'live', resultTokens: true });
    const jwt = await tokenOf(key.key);
    const options = { issuer: ISSUER, audience: key.id };
    await expect(
      jwtVerify(jwt, createLocalJWKSet(await jwksAt('/.well-known/jwks-test.json')), options),
    ).rejects.toMatchObject({ code: 'ERR_JWKS_NO_MATCHING_KEY' });
    const { payload } = await jwtVerify(
      jwt,
      createLocalJWKSet(await jwksAt('/.well-known/jwks.json')),
      options,
    );
    expect(Object.keys(payload)).toEqual(CLAIMS);
  });

  it('openid-configuration names the test JWKS beside the live one; without a test signer it is 404', async () => {
    const res = await service.app.request(`${BASE}/.well-known/openid-configuration`);
    expect(await res.json()).toEqual({
      issuer: ISSUER,
      jwks_uri: `${ISSUER}/.well-known/jwks.json`,
      attest_test_jwks_uri: `${ISSUER}/.well-known/jwks-test.json`,
    });
    const liveOnly = createTestService(db, { resultTokens: live });
    expect((await liveOnly.app.request(`${BASE}/.well-known/jwks-test.json`)).status).toBe(404);
  });

  it('rotating the test keys leaves the live keys alone', async () => {
    const keys = createResultKeyRepository(db.db, TEST_SECRETS);
    const before = (await keys.list(undefined, 'live')).map((k) => k.id);
    const { newResultSigningKey } = await import('../../src/core/resultToken.js');
    await keys.rotate(await newResultSigningKey(), 6, undefined, 'test');
    expect((await keys.list(undefined, 'live')).map((k) => k.id)).toEqual(before);
    const tests = await keys.list(undefined, 'test');
    expect(tests).toHaveLength(2);
    expect(tests.every((k) => k.mode === 'test')).toBe(true);
    // the first test key is retired by the second test key, not by any live key
    expect(tests[0]!.retiredAt).not.toBeNull();
    expect((await keys.list(undefined, 'live'))[0]!.retiredAt).toBeNull();
  });
});

describe.each(backends())('turning result tokens on and off on $name', (backend) => {
  const db = useDatabase(backend);

  it('keys update reaches a running instance within its revalidation time (5 s), and is audited', async () => {
    let clock = Date.now();
    const key = await issueKey(db, { name: 'switch' });
    const signer = createResultTokenSigner({
      keys: createResultKeyRepository(db.db, TEST_SECRETS),
      issuer: ISSUER,
      ttlSeconds: 300,
      refreshMs: 5000,
    });
    const service = createTestService(db, { resultTokens: signer, auth: { now: () => clock } });
    const body = async () => {
      const nonce = randomBytes(32);
      const res = await verify(service.app, key.key, {
        attestationToken: b64(token(nonce)),
        expectedNonce: nonce.toString('base64'),
      });
      return (await res.json()) as Record<string, unknown>;
    };
    expect(await body()).not.toHaveProperty('resultToken');
    const { createApiKeyRepository } = await import('../../src/db/apiKeys.js');
    const events: unknown[] = [];
    const repo = createApiKeyRepository(db.db);
    expect(
      await repo.setResultTokens(key.id, true, { actor: 'alice', log: (e) => events.push(e) }),
    ).toEqual({
      found: true,
      changed: true,
    });
    clock += 5000;
    expect(await body()).toHaveProperty('resultToken');
    expect(events).toMatchObject([
      {
        action: 'keys.update',
        target: key.id,
        actor: 'alice',
        before: { resultTokens: false },
        after: { resultTokens: true },
      },
    ]);
    // the same value again changes and records nothing
    expect(
      await repo.setResultTokens(key.id, true, { actor: 'alice', log: (e) => events.push(e) }),
    ).toEqual({
      found: true,
      changed: false,
    });
    expect(events).toHaveLength(1);
    await repo.setResultTokens(key.id, false);
    clock += 5000;
    expect(await body()).not.toHaveProperty('resultToken');
    expect(await repo.setResultTokens('0000000000000000', true)).toEqual({
      found: false,
      changed: false,
    });
  });
});
