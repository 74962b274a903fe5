/**
 * The pure half of a consume: checkOwnResultToken names why a token the deployment did not sign
 * as a result token fails (each reason a value, never a throw), and mayConsume holds every
 * authorization rule (today: the key's mode against the token's `test` claim).
 */
import { generateKeyPairSync } from 'node:crypto';
import { CompactSign, createLocalJWKSet, exportJWK, type JWK } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import { checkOwnResultToken, mayConsume } from '../../src/core/consumeResult.js';
import { lowSJws } from '../../src/core/ecdsaLowS.js';
import type { ResultTokenClaims } from '../../src/core/resultTokenClaims.js';

const ISSUER = 'https://attest.example.com';
const NOW = new Date('2026-11-27T12:00:00Z');
const iat = Math.floor(NOW.getTime() / 1000) - 10;
const CLAIMS: ResultTokenClaims = {
  iss: ISSUER,
  aud: 'k_rp',
  sub: 'com.example.app',
  iat,
  exp: iat + 300,
  jti: '7b0c4c1e-2f1e-4c53-9d53-6f1f0b6f3c11',
  service: 'gms',
  approach: 'sessionless',
  nonce: 'bm9uY2U',
  details: { packageName: 'com.example.app' },
};

const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
let keys: ReturnType<typeof createLocalJWKSet>;
beforeAll(async () => {
  const jwk: JWK = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' };
  keys = createLocalJWKSet({ keys: [jwk] });
});

const sign = (
  payload: object,
  header: Record<string, unknown> = { alg: 'ES256', typ: 'attest-result+jwt', kid: 'k1' },
) =>
  // as the service signs: the low-S form (a high-S twin is refused)
  new CompactSign(Buffer.from(JSON.stringify(payload)))
    .setProtectedHeader(header as { alg: string })
    .sign(privateKey)
    .then(lowSJws);

const check = (token: string, now = NOW) =>
  checkOwnResultToken(token, { keys, issuer: ISSUER, now });

describe('checkOwnResultToken', () => {
  it('a token of the deployment: ok with its claims', async () => {
    expect(await check(await sign(CLAIMS))).toEqual({ ok: true, claims: CLAIMS });
  });

  it.each([
    ['an extra claim', { ...CLAIMS, apiKey: 'x' }, 'result_token_claims_invalid'],
    ['a missing claim', { ...CLAIMS, nonce: undefined }, 'result_token_claims_invalid'],
    ['test that is not true', { ...CLAIMS, test: false }, 'result_token_claims_invalid'],
    [
      'another issuer',
      { ...CLAIMS, iss: 'https://other.example.com' },
      'result_token_issuer_mismatch',
    ],
    ['past exp', { ...CLAIMS, exp: iat + 5 }, 'result_token_expired'],
  ])('%s: %s', async (_, payload, reason) => {
    expect(await check(await sign(payload))).toMatchObject({ ok: false, reason });
  });

  it('expires at exp exactly, not a second before', async () => {
    const token = await sign(CLAIMS);
    expect(await check(token, new Date((CLAIMS.exp - 1) * 1000))).toMatchObject({ ok: true });
    expect(await check(token, new Date(CLAIMS.exp * 1000))).toMatchObject({
      ok: false,
      reason: 'result_token_expired',
    });
  });

  it('another typ or alg is malformed, an unknown kid key_unknown', async () => {
    const typ = await sign(CLAIMS, { alg: 'ES256', typ: 'JWT', kid: 'k1' });
    expect(await check(typ)).toMatchObject({ reason: 'result_token_malformed' });
    const none = `${Buffer.from('{"alg":"none","typ":"attest-result+jwt"}').toString('base64url')}.${Buffer.from(JSON.stringify(CLAIMS)).toString('base64url')}.`;
    expect(await check(none)).toMatchObject({ reason: 'result_token_malformed' });
    const kid = await sign(CLAIMS, { alg: 'ES256', typ: 'attest-result+jwt', kid: 'k9' });
    expect(await check(kid)).toMatchObject({ reason: 'result_token_key_unknown' });
  });
});

describe('mayConsume', () => {
  it('a key scoped to apps consumes tokens of its apps only (apple: appId, Android: packageName)', () => {
    const apple = {
      ...CLAIMS,
      service: 'apple',
      details: { appId: 'ABCDE12345.com.example.app', keyIdentifier: 'k' },
    };
    const scoped = { id: 'k', mode: 'live' as const, apps: ['ABCDE12345.com.example.app'] };
    expect(mayConsume(scoped, apple)).toEqual({ ok: true });
    expect(mayConsume(scoped, CLAIMS)).toMatchObject({
      ok: false,
      reason: 'result_token_app_not_in_key_scope',
      detail: expect.stringContaining('com.example.app'),
    });
    expect(mayConsume({ ...scoped, apps: ['com.example.app'] }, CLAIMS)).toEqual({ ok: true });
    const androidKey = { ...CLAIMS, service: 'android-key' };
    expect(mayConsume({ ...scoped, apps: ['com.example.app'] }, androidKey)).toEqual({ ok: true });
    // unscoped (null, absent): every app
    expect(mayConsume({ id: 'k', mode: 'live', apps: null }, apple)).toEqual({ ok: true });
    // the mode rule comes first
    expect(mayConsume({ ...scoped, mode: 'test' }, { ...apple, test: true as const })).toEqual({
      ok: true,
    });
  });

  it('a live key consumes live tokens, a test key test tokens, neither the other', () => {
    const test = { ...CLAIMS, test: true as const };
    expect(mayConsume({ id: 'k', mode: 'live' }, CLAIMS)).toEqual({ ok: true });
    expect(mayConsume({ id: 'k', mode: 'test' }, test)).toEqual({ ok: true });
    expect(mayConsume({ id: 'k', mode: 'live' }, test)).toMatchObject({
      ok: false,
      reason: 'result_token_wrong_mode',
    });
    expect(mayConsume({ id: 'k', mode: 'test' }, CLAIMS)).toMatchObject({
      ok: false,
      reason: 'result_token_wrong_mode',
    });
  });
});
