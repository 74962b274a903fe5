/**
 * Result-token signatures have one form: ECDSA's (r, n - s) verifies as well as (r, s), so the
 * high-S twin of a genuine token is another string an RP that de-duplicates by token string would
 * take for another token. The signer always issues low-S; consume, the client and verify-file
 * refuse the twin.
 */
import { createLocalJWKSet } from 'jose';
import { describe, expect, it } from 'vitest';
import { AttestResultTokenError, verifyResultToken } from '../../src/client/index.js';
import { checkOwnResultToken } from '../../src/core/consumeResult.js';
import { isHighS, jwsHasHighS, lowSJws } from '../../src/core/ecdsaLowS.js';
import { checkResultToken, type ResultJwk } from '../../src/core/resultToken.js';
import { createResultKeyRepository } from '../../src/db/resultKeys.js';
import { createResultTokenSigner } from '../../src/server/resultTokenSigner.js';
import { backends, useDatabase } from '../support/databases.js';
import { TEST_SECRETS } from '../support/secrets.js';

const ISSUER = 'https://attest.example.com';
const N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;
const DETAILS = {
  service: 'gms',
  googleTokenDetails: { packageName: 'com.example.app' },
} as never;

/** The other form of a token's signature: (r, n - s). */
function twin(jws: string): string {
  const [h, p, sig] = jws.split('.');
  const bytes = Buffer.from(sig!, 'base64url');
  const s = N - BigInt(`0x${bytes.subarray(32).toString('hex')}`);
  const other = Buffer.concat([
    bytes.subarray(0, 32),
    Buffer.from(s.toString(16).padStart(64, '0'), 'hex'),
  ]);
  return `${h}.${p}.${other.toString('base64url')}`;
}

describe.each(backends())('canonical result-token signatures ($name)', (backend) => {
  const db = useDatabase(backend);

  async function signer() {
    const s = createResultTokenSigner({
      keys: createResultKeyRepository(db.db, TEST_SECRETS),
      issuer: ISSUER,
      ttlSeconds: 300,
      refreshMs: 5000,
    });
    await s.ensureKey();
    return s;
  }
  const sign = (s: Awaited<ReturnType<typeof signer>>) =>
    s.sign({
      apiKeyId: 'k_rp',
      approach: 'sessionless',
      nonce: new Uint8Array(32),
      details: DETAILS,
    });

  it('a signed batch of 200 tokens is all low-S (WebCrypto alone gives high-S about half the time)', async () => {
    const s = await signer();
    const tokens = await Promise.all(Array.from({ length: 200 }, () => sign(s)));
    expect(tokens.filter(jwsHasHighS)).toEqual([]);
    // and each is still a token that verifies
    const keys = createLocalJWKSet((await s.jwks()) as never);
    for (const t of tokens.slice(0, 20))
      expect(await checkOwnResultToken(t, { keys, issuer: ISSUER, now: new Date() })).toMatchObject(
        { ok: true },
      );
  });

  it('the high-S twin of a token is refused at consume, by the client and by verify-file', async () => {
    const s = await signer();
    const jws = await sign(s);
    const high = twin(jws);
    expect(jwsHasHighS(high)).toBe(true);
    const jwks = (await s.jwks()) as { keys: ResultJwk[] };
    const keys = createLocalJWKSet(jwks as never);
    const now = new Date();
    expect(await checkOwnResultToken(jws, { keys, issuer: ISSUER, now })).toMatchObject({
      ok: true,
    });
    expect(await checkOwnResultToken(high, { keys, issuer: ISSUER, now })).toMatchObject({
      ok: false,
      reason: 'result_token_signature_invalid',
    });

    const client = (t: string) =>
      verifyResultToken(t, { issuer: ISSUER, audience: 'k_rp', jwks: jwks as never }).then(
        () => 'verified',
        (err: unknown) => (err instanceof AttestResultTokenError ? err.problem : String(err)),
      );
    expect(await client(jws)).toBe('verified');
    expect(await client(high)).toBe('signature');

    const file = await checkResultToken(high, { keys: jwks.keys, now, issuer: ISSUER });
    expect(file.valid).toBe(false);
    expect(file.checks.find((c) => c.id === 'signature')).toMatchObject({
      status: 'fail',
      detail: expect.stringContaining('high-S'),
    });
    expect((await checkResultToken(jws, { keys: jwks.keys, now, issuer: ISSUER })).valid).toBe(
      true,
    );
  });
});

describe('lowSJws', () => {
  it('turns a high-S signature into its low twin and leaves a low one alone', () => {
    const low = `a.b.${Buffer.concat([Buffer.alloc(32, 7), Buffer.alloc(32, 1)]).toString('base64url')}`;
    expect(lowSJws(low)).toBe(low);
    const high = twin(low);
    expect(isHighS(Buffer.from(high.split('.')[2]!, 'base64url'))).toBe(true);
    expect(lowSJws(high)).toBe(low);
    // not ES256's 64 bytes: left to the signature check
    expect(jwsHasHighS('a.b.AAAA')).toBe(false);
  });
});
