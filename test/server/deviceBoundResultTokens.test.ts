/**
 * Result tokens bound to the device key (RFC 7800 `cnf.jwk`), end to end over HTTP with the real
 * verifiers and key stores on both databases: an App Attest token's key is the one whose point's
 * SHA-256 is the key id (its `sub`), an android-key token's is the attested leaf key (SHA-256 of
 * its SPKI is the key id); the typed client's `verifyPossession` accepts the device key's
 * signature over a service's own challenge and refuses another key's.
 */
import { createHash, createPublicKey, randomBytes } from 'node:crypto';
import { decode } from 'cbor-x';
import { calculateJwkThumbprint, exportJWK, type JWK } from 'jose';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  verifyPossession,
  verifyResultToken,
  type ResultTokenClaims,
} from '../../src/client/index.js';
import { signAndroidAssertion } from '../../src/core/dev/androidKeyMint.js';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import { createResultKeyRepository } from '../../src/db/resultKeys.js';
import { createResultTokenSigner } from '../../src/server/resultTokenSigner.js';
import {
  ANDROID_NOW,
  ANDROID_PACKAGE,
  androidAssertion,
  androidRegistration,
  createAndroidTestCa,
  type AndroidTestCa,
} from '../support/androidFactory.js';
import {
  createAssertion,
  createAttestation,
  createDeviceKey,
  createTestCa,
  encodeAppleToken,
  sha256,
  TEST_APP_ID,
  type TestCa,
} from '../support/appleFactory.js';
import { backends, useDatabase } from '../support/databases.js';
import { TEST_SECRETS } from '../support/secrets.js';
import { BASE, createPlatformService, issueKey, verifySessionless } from '../support/service.js';

const ISSUER = 'https://attest.example.com';

let appleCa: TestCa;
let androidCa: AndroidTestCa;
beforeAll(async () => {
  appleCa = await createTestCa();
  androidCa = await createAndroidTestCa();
});

describe.each(backends())('device-bound result tokens on $name', (backend) => {
  const db = useDatabase(backend);
  let key: { id: string; key: string };
  let service: ReturnType<typeof createPlatformService>;

  beforeEach(async () => {
    key = await issueKey(db, { name: 'pop', resultTokens: true });
    const allowlist = createAllowlistRepository(db.db, TEST_SECRETS);
    await allowlist.addApple(TEST_APP_ID, 'production');
    await allowlist.addAndroid(ANDROID_PACKAGE, null, { keyAttestation: true });
    service = createPlatformService(db, {
      // both test CAs issue for this instant
      now: ANDROID_NOW,
      appleRoots: appleCa.roots,
      androidRoots: androidCa.roots,
      resultTokens: createResultTokenSigner({
        keys: createResultKeyRepository(db.db, TEST_SECRETS),
        issuer: ISSUER,
        ttlSeconds: 300,
        refreshMs: 5000,
      }),
    });
  });

  /** The claims of the result token of one verify, checked by the typed client. */
  async function claimsOf(res: Response, nonce: Buffer): Promise<ResultTokenClaims> {
    expect(res.status).toBe(200);
    const body = (await res.json()) as { isValid: boolean; resultToken?: string };
    expect(body.isValid).toBe(true);
    const jwks = await (await service.app.request(`${BASE}/.well-known/jwks.json`)).json();
    return verifyResultToken(body.resultToken!, {
      issuer: ISSUER,
      audience: key.id,
      jwks: jwks as { keys: Record<string, unknown>[] },
      nonce,
    });
  }

  it('App Attest: cnf.jwk is the attested key (its point hashes to the key id), on registration and assertion; possession checks', async () => {
    const device = await createDeviceKey();
    const nonce = randomBytes(32);
    const { attestation } = await createAttestation(appleCa, device, { nonce });
    const registered = await claimsOf(
      await verifySessionless(
        service.app,
        key.key,
        () => encodeAppleToken({ keyId: device.keyId, attestation, nonce }),
        nonce,
      ),
      nonce,
    );
    const jwk = registered.cnf!.jwk;
    expect(Object.keys(jwk).sort()).toEqual(['crv', 'kty', 'x', 'y']);
    expect(jwk).toMatchObject({ kty: 'EC', crv: 'P-256' });
    // the App Attest key id is SHA-256 of the uncompressed point 0x04 || X || Y (not the RFC 7638
    // thumbprint, which hashes the JWK's JSON): both relations hold for the same key
    const ec = jwk as { x: string; y: string };
    const point = Buffer.concat([
      Buffer.from([4]),
      Buffer.from(ec.x, 'base64url'),
      Buffer.from(ec.y, 'base64url'),
    ]);
    expect(sha256(point).toString('base64')).toBe(registered.sub);
    expect(registered.sub).toBe(device.keyId.toString('base64'));
    expect(await calculateJwkThumbprint(jwk as JWK)).toBe(
      await calculateJwkThumbprint(await exportJWK(device.publicKey)),
    );

    // an assertion's token names the stored key, the same one
    const next = randomBytes(32);
    const asserted = await claimsOf(
      await verifySessionless(
        service.app,
        key.key,
        () =>
          encodeAppleToken({
            keyId: device.keyId,
            assertion: createAssertion(device, { nonce: next }).assertion,
            nonce: next,
          }),
        next,
      ),
      next,
    );
    expect(asserted.cnf).toEqual(registered.cnf);

    // a service downstream: its own challenge, the app's assertion over SHA-256 of it
    const challenge = randomBytes(32);
    const proof = createAssertion(device, { clientDataHash: sha256(challenge), counter: 2 });
    const signature = signatureOf(proof.assertion);
    expect(
      verifyPossession(registered, {
        challenge,
        signature,
        authenticatorData: proof.authenticatorData,
      }),
    ).toBe(true);
    // another challenge, another key, or no authenticatorData
    expect(
      verifyPossession(registered, {
        challenge: randomBytes(32),
        signature,
        authenticatorData: proof.authenticatorData,
      }),
    ).toBe(false);
    const stranger = await createDeviceKey();
    const forged = createAssertion(stranger, { clientDataHash: sha256(challenge), counter: 2 });
    expect(
      verifyPossession(registered, {
        challenge,
        signature: signatureOf(forged.assertion),
        authenticatorData: forged.authenticatorData,
      }),
    ).toBe(false);
    expect(() => verifyPossession(registered, { challenge, signature })).toThrow(
      /authenticatorData/,
    );
  });

  it('android-key: cnf.jwk is the attested leaf key (SHA-256 of its SPKI is the key id); possession checks', async () => {
    const nonce = randomBytes(32);
    const made = await androidRegistration(androidCa, { nonce });
    const registered = await claimsOf(
      await verifySessionless(service.app, key.key, () => made.token, nonce),
      nonce,
    );
    const jwk = registered.cnf!.jwk;
    expect(jwk).toMatchObject({ kty: 'EC', crv: 'P-256' });
    const spki = createPublicKey({ key: { ...jwk }, format: 'jwk' }).export({
      format: 'der',
      type: 'spki',
    });
    expect(Buffer.from(spki).equals(Buffer.from(made.device.spki))).toBe(true);
    expect(createHash('sha256').update(spki).digest('base64')).toBe(registered.sub);
    expect(await calculateJwkThumbprint(jwk as JWK)).toBe(
      await calculateJwkThumbprint(await exportJWK(createPublicKey(made.device.privateKey))),
    );

    const next = randomBytes(32);
    const asserted = await claimsOf(
      await verifySessionless(
        service.app,
        key.key,
        () => androidAssertion(made.device, next),
        next,
      ),
      next,
    );
    expect(asserted.cnf).toEqual(registered.cnf);

    const challenge = randomBytes(32);
    expect(
      verifyPossession(registered, {
        challenge,
        signature: signAndroidAssertion(made.device, challenge),
      }),
    ).toBe(true);
    const other = (await androidRegistration(androidCa, { nonce: randomBytes(32) })).device;
    expect(
      verifyPossession(registered, {
        challenge,
        signature: signAndroidAssertion(other, challenge),
      }),
    ).toBe(false);
    expect(
      verifyPossession(registered, {
        challenge: randomBytes(32),
        signature: signAndroidAssertion(made.device, challenge),
      }),
    ).toBe(false);
    expect(verifyPossession(registered, { challenge, signature: randomBytes(70) })).toBe(false);
  });
});

describe('verifyPossession without a device key', () => {
  it('a result that names none (Play Integrity) is a TypeError, not a false', () => {
    expect(() =>
      verifyPossession(
        { service: 'gms' },
        { challenge: randomBytes(8), signature: randomBytes(64) },
      ),
    ).toThrow(/names no device key/);
  });
});

/** The signature of an App Attest assertion object (CBOR map: signature, authenticatorData). */
function signatureOf(assertion: Uint8Array): Uint8Array {
  const map = decode(Buffer.from(assertion)) as { signature: Uint8Array } | Map<string, Uint8Array>;
  return map instanceof Map ? map.get('signature')! : map.signature;
}
