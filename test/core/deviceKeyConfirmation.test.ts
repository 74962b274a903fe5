/**
 * The `cnf` claim of a result token: the device key's public JWK (EC or RSA, the RFC 7638
 * members only), accepted by the service's claim check and the typed client when well-formed,
 * refused when it is anything else.
 */
import { generateKeyPairSync } from 'node:crypto';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import { AttestResultTokenError, verifyResultToken } from '../../src/client/index.js';
import { deviceKeyConfirmation } from '../../src/core/deviceKeyConfirmation.js';
import { claimsProblem } from '../../src/core/resultToken.js';
import { lowSJws } from '../../src/core/ecdsaLowS.js';

const spkiOf = (key: ReturnType<typeof generateKeyPairSync>['publicKey']) =>
  key.export({ format: 'der', type: 'spki' }).toString('base64');

describe('deviceKeyConfirmation', () => {
  it('an EC P-256 key: kty, crv, x, y and its standard thumbprint', async () => {
    const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const { jwk } = await deviceKeyConfirmation(spkiOf(publicKey));
    expect(Object.keys(jwk).sort()).toEqual(['crv', 'kty', 'x', 'y']);
    expect(await calculateJwkThumbprint(jwk)).toBe(
      await calculateJwkThumbprint(await exportJWK(publicKey)),
    );
  });
  it('an RSA key (some Android leaves): kty, n, e', async () => {
    const { publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const { jwk } = await deviceKeyConfirmation(spkiOf(publicKey));
    expect(Object.keys(jwk).sort()).toEqual(['e', 'kty', 'n']);
    expect(jwk).toMatchObject({ kty: 'RSA', e: 'AQAB' });
  });
  it('refuses what is no key, or an Ed25519 key (no verifier registers one)', async () => {
    await expect(deviceKeyConfirmation('%%%')).rejects.toThrow(/base64/);
    const { publicKey } = generateKeyPairSync('ed25519');
    await expect(deviceKeyConfirmation(spkiOf(publicKey))).rejects.toThrow(/no confirmation/);
  });
});

const claims = {
  iss: 'https://attest.example.com',
  aud: '0h3k5x9q2m7c1b4n',
  sub: 'a2V5',
  iat: 1_767_261_600,
  exp: 1_767_261_900,
  jti: 'j',
  service: 'android-key',
  approach: 'sessionless',
  nonce: 'bm9uY2U',
  details: {},
};
const jwk = { kty: 'EC', crv: 'P-256', x: 'eA', y: 'eQ' };

describe('the cnf claim in the claim checks', () => {
  it('the service: absent or a confirmation JWK passes; anything else is named', () => {
    expect(claimsProblem(claims)).toBeUndefined();
    expect(claimsProblem({ ...claims, cnf: { jwk } })).toBeUndefined();
    expect(claimsProblem({ ...claims, cnf: 'x' })).toBe('cnf is not an object');
    expect(claimsProblem({ ...claims, cnf: { jwk, jkt: 'x' } })).toBe(
      'cnf has members other than jwk',
    );
    expect(claimsProblem({ ...claims, cnf: { jwk: [] } })).toBe('cnf.jwk is not an object');
    expect(claimsProblem({ ...claims, cnf: { jwk: { kty: 'oct' } } })).toBe(
      'cnf.jwk.kty is neither EC nor RSA',
    );
  });

  it('the typed client: a token with a confirmation JWK verifies, one with a broken cnf is refused as claims', async () => {
    const { privateKey, publicKey } = await generateKeyPair('ES256');
    const pub = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256' };
    // in the low-S form the deployment issues (the client refuses the high-S twin)
    const sign = async (payload: Record<string, unknown>) =>
      lowSJws(
        await new SignJWT(payload)
          .setProtectedHeader({ alg: 'ES256', typ: 'attest-result+jwt', kid: 'k1' })
          .sign(privateKey),
      );
    const options = {
      issuer: claims.iss,
      audience: claims.aud,
      jwks: { keys: [pub] },
      currentDate: new Date((claims.iat + 10) * 1000),
    };
    const good = await verifyResultToken(await sign({ ...claims, cnf: { jwk } }), options);
    expect(good.cnf).toEqual({ jwk });
    const bad = await verifyResultToken(await sign({ ...claims, cnf: { jwk: 'x' } }), options).then(
      () => 'verified',
      (err: unknown) => (err instanceof AttestResultTokenError ? err.problem : String(err)),
    );
    expect(bad).toBe('claims');
  });
});
