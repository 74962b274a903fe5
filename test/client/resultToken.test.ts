/**
 * The client's verifyResultToken against tokens the service really signs and the JWKS it really
 * serves (fetched through the app), with its cache, and every way a token is refused.
 */
import { createHash, randomBytes } from 'node:crypto';
import { SignJWT, generateKeyPair } from 'jose';
import { describe, expect, it } from 'vitest';
import {
  AttestResultTokenError,
  createAttestClient,
  verifyResultToken,
} from '../../src/client/index.js';
import { createResultKeyRepository } from '../../src/db/resultKeys.js';
import { createResultTokenSigner } from '../../src/server/resultTokenSigner.js';
import { backends, useDatabase } from '../support/databases.js';
import { TEST_SECRETS } from '../support/secrets.js';
import { BASE, createTestService, issueKey } from '../support/service.js';
import { b64, token } from '../support/tokens.js';

const ISSUER = 'https://attest.example.com';
const JWKS_URL = `${BASE}/.well-known/jwks.json`;

describe('verifyResultToken', () => {
  const db = useDatabase(backends()[0]!);
  let service: ReturnType<typeof createTestService>;
  let key: { id: string; key: string };
  let fetches: string[];
  let appFetch: typeof fetch;

  const setup = async () => {
    key = await issueKey(db, { name: 'rp', resultTokens: true });
    const signer = createResultTokenSigner({
      keys: createResultKeyRepository(db.db, TEST_SECRETS),
      issuer: ISSUER,
      ttlSeconds: 300,
      refreshMs: 5000,
    });
    service = createTestService(db, { resultTokens: signer });
    fetches = [];
    appFetch = (async (input: string | URL | Request, init?: RequestInit) => {
      const url = input instanceof Request ? input.url : String(input);
      fetches.push(url);
      return service.app.request(url, init);
    }) as typeof fetch;
  };

  /** a valid verify through the typed client: the answer carries the token */
  async function signed(nonce = randomBytes(32)) {
    const client = createAttestClient({ baseUrl: BASE, apiKey: key.key, fetch: appFetch });
    const result = await client.verify({
      attestationToken: b64(token(nonce)),
      expectedNonce: nonce,
    });
    expect(result.isValid).toBe(true);
    if (!result.isValid) throw new Error('unreachable');
    expect(typeof result.resultToken).toBe('string');
    return { jwt: result.resultToken!, nonce };
  }

  const options = () => ({
    issuer: ISSUER,
    audience: key.id,
    jwksUrl: JWKS_URL,
    fetch: appFetch,
  });
  const problem = (p: Promise<unknown>) =>
    p.then(
      () => 'verified',
      (err: unknown) => (err instanceof AttestResultTokenError ? err.problem : String(err)),
    );

  it("verifies the service's token and returns its claims; the JWKS is fetched once for many tokens", async () => {
    await setup();
    const { jwt, nonce } = await signed();
    const claims = await verifyResultToken(jwt, { ...options(), nonce });
    expect(claims).toMatchObject({
      iss: ISSUER,
      aud: key.id,
      service: 'apple',
      approach: 'sessionless',
      nonce: createHash('sha256').update(nonce).digest('base64url'),
      details: { appId: expect.any(String) },
    });
    const before = fetches.filter((u) => u === JWKS_URL).length;
    for (let i = 0; i < 3; i++) await verifyResultToken((await signed()).jwt, options());
    expect(fetches.filter((u) => u === JWKS_URL).length).toBe(before);
    expect(before).toBe(1);
  });

  it('refuses: another audience or issuer, a wrong nonce, an expired token, a forged or altered one', async () => {
    await setup();
    const { jwt, nonce } = await signed();
    expect(
      await problem(verifyResultToken(jwt, { ...options(), audience: 'someoneelse00000' })),
    ).toBe('claims');
    expect(
      await problem(verifyResultToken(jwt, { ...options(), issuer: 'https://other.example' })),
    ).toBe('claims');
    expect(await problem(verifyResultToken(jwt, { ...options(), nonce: randomBytes(32) }))).toBe(
      'nonce',
    );
    expect(await problem(verifyResultToken(jwt, { ...options(), nonce }))).toBe('verified');
    expect(
      await problem(
        verifyResultToken(jwt, { ...options(), currentDate: new Date(Date.now() + 301_000) }),
      ),
    ).toBe('expired');
    const [h, p, s] = jwt.split('.');
    const altered = JSON.parse(Buffer.from(p!, 'base64url').toString()) as Record<string, unknown>;
    altered.sub = 'another device';
    const tampered = `${h}.${Buffer.from(JSON.stringify(altered)).toString('base64url')}.${s}`;
    expect(await problem(verifyResultToken(tampered, options()))).toBe('signature');
    // a key of its own, with the published kid: the signature does not verify
    const { privateKey } = await generateKeyPair('ES256');
    const header = JSON.parse(Buffer.from(h!, 'base64url').toString()) as { kid: string };
    const forged = await new SignJWT(altered)
      .setProtectedHeader({ alg: 'ES256', typ: 'attest-result+jwt', kid: header.kid })
      .sign(privateKey);
    expect(await problem(verifyResultToken(forged, options()))).toBe('signature');
    expect(await problem(verifyResultToken('not.a.jwt', options()))).toBe('malformed');
  });

  it('a fixed JWKS works with no network; keys that cannot be fetched are keys_unavailable', async () => {
    await setup();
    const { jwt } = await signed();
    const jwks = (await (await service.app.request(JWKS_URL)).json()) as {
      keys: Record<string, unknown>[];
    };
    const claims = await verifyResultToken(jwt, { issuer: ISSUER, audience: key.id, jwks });
    expect(claims.aud).toBe(key.id);
    const down = (async () => {
      throw new TypeError('fetch failed');
    }) as unknown as typeof fetch;
    expect(
      await problem(
        verifyResultToken(jwt, {
          issuer: ISSUER,
          audience: key.id,
          jwksUrl: JWKS_URL,
          fetch: down,
        }),
      ),
    ).toBe('keys_unavailable');
    // the error names the URL it tried
    await expect(
      verifyResultToken(jwt, { issuer: ISSUER, audience: key.id, jwksUrl: JWKS_URL, fetch: down }),
    ).rejects.toMatchObject({
      jwksUrl: JWKS_URL,
      message: expect.stringContaining(`(keys: ${JWKS_URL})`),
    });
    await expect(verifyResultToken('', options())).rejects.toThrow(TypeError);
  });

  it("a test key's token is refused unless acceptTestTokens; accepted, it verifies against the test JWKS only", async () => {
    const keys = createResultKeyRepository(db.db, TEST_SECRETS);
    const live = createResultTokenSigner({
      keys,
      issuer: ISSUER,
      ttlSeconds: 300,
      refreshMs: 5000,
    });
    const test = createResultTokenSigner({
      keys,
      issuer: ISSUER,
      ttlSeconds: 300,
      refreshMs: 5000,
      mode: 'test',
    });
    const testKey = await issueKey(db, { name: 'rp test', mode: 'test', resultTokens: true });
    const app = createTestService(db, {
      resultTokens: live,
      testResultTokens: test,
      testKeys: true,
    }).app;
    const seen: string[] = [];
    const viaApp = (async (input: string | URL | Request, init?: RequestInit) => {
      const url = input instanceof Request ? input.url : String(input);
      seen.push(url);
      return app.request(url, init);
    }) as typeof fetch;
    const nonce = randomBytes(32);
    const client = createAttestClient({ baseUrl: BASE, apiKey: testKey.key, fetch: viaApp });
    const result = await client.verify({
      attestationToken: b64(token(nonce)),
      expectedNonce: nonce,
    });
    if (!result.isValid) throw new Error('not valid');
    const jwt = result.resultToken!;
    const base = { issuer: ISSUER, audience: testKey.id, fetch: viaApp };

    expect(await problem(verifyResultToken(jwt, { ...base, jwksUrl: JWKS_URL }))).toBe(
      'test_token',
    );
    // the message ends with the URL, as every other problem's does
    const refused = (await verifyResultToken(jwt, base).catch((e: unknown) => e)) as Error;
    expect(refused.message).toMatch(/ \(keys: \S+\/\.well-known\/jwks-test\.json\)$/);
    // refused before any key is fetched
    expect(seen.filter((u) => u.includes('/.well-known/'))).toEqual([]);
    const claims = await verifyResultToken(jwt, {
      ...base,
      acceptTestTokens: true,
      testJwksUrl: `${BASE}/.well-known/jwks-test.json`,
    });
    expect(claims.test).toBe(true);
    // told to look for it in the live keys, it is not there
    expect(
      await problem(
        verifyResultToken(jwt, { ...base, acceptTestTokens: true, testJwksUrl: JWKS_URL }),
      ),
    ).toBe('signature');
  });
});
