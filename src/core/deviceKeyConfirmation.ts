/**
 * RFC 7800 proof-of-possession for result tokens: a token about a device key (App Attest,
 * Android key attestation) names that public key in `cnf.jwk`, so a service downstream can ask
 * the device to sign its own challenge and check the signature against the token, not only trust
 * that some request once carried a valid attestation.
 */
import { createPublicKey } from 'node:crypto';
import { exportJWK, type JWK } from 'jose';
import { decodeBase64 } from './base64.js';
import type { DeviceKeyConfirmation } from './resultTokenClaims.js';

/**
 * The `cnf` of a device key, from its DER SubjectPublicKeyInfo (base64, as the verifier's facts
 * carry it). Only the members RFC 7638 thumbprints, so `calculateJwkThumbprint(cnf.jwk)` is the
 * key's standard thumbprint and nothing else about the key (no `kid`, `alg`) is asserted.
 * Throws for a key that is neither EC nor RSA: a verifier only registers those.
 */
export async function deviceKeyConfirmation(spkiBase64: string): Promise<DeviceKeyConfirmation> {
  const spki = decodeBase64(spkiBase64);
  if (!spki) throw new TypeError('the device key is not base64');
  const jwk: JWK = await exportJWK(
    createPublicKey({ key: Buffer.from(spki), format: 'der', type: 'spki' }),
  );
  if (jwk.kty === 'EC' && jwk.crv && jwk.x && jwk.y)
    return { jwk: { kty: 'EC', crv: jwk.crv, x: jwk.x, y: jwk.y } };
  if (jwk.kty === 'RSA' && jwk.n && jwk.e) return { jwk: { kty: 'RSA', n: jwk.n, e: jwk.e } };
  throw new TypeError(`a device key of type ${String(jwk.kty)} has no confirmation JWK`);
}

/** What is wrong with a token's `cnf` claim (absent is fine), or undefined. */
export function confirmationProblem(cnf: unknown): string | undefined {
  if (cnf === undefined) return undefined;
  if (typeof cnf !== 'object' || cnf === null || Array.isArray(cnf)) return 'cnf is not an object';
  const keys = Object.keys(cnf);
  if (keys.length !== 1 || keys[0] !== 'jwk') return 'cnf has members other than jwk';
  const jwk = (cnf as { jwk: unknown }).jwk;
  if (typeof jwk !== 'object' || jwk === null || Array.isArray(jwk))
    return 'cnf.jwk is not an object';
  const kty = (jwk as { kty?: unknown }).kty;
  if (kty !== 'EC' && kty !== 'RSA') return 'cnf.jwk.kty is neither EC nor RSA';
  return undefined;
}
