/**
 * Proof of possession for result tokens bound to a device key (RFC 7800 `cnf.jwk`): a service
 * that receives a result token asks the device to sign a challenge of its own with the attested
 * key, and checks that signature here. A token copied off the wire is then useless without the
 * device. Node built-ins only (the client has no runtime dependency).
 */
import { createHash, createPublicKey, verify } from 'node:crypto';
import type { DeviceJwk } from '../core/resultTokenClaims.js';

/** What the device sent back for the service's challenge. */
export interface PossessionProof {
  /** the service's own challenge: fresh, single-use, made by the service (not the device) */
  challenge: Uint8Array;
  /** the device's signature with SHA-256: DER ECDSA (or RSASSA-PKCS1-v1_5 for an RSA key) */
  signature: Uint8Array;
  /**
   * App Attest only: the authenticatorData of the assertion the app made with
   * `generateAssertion(keyId, SHA-256(challenge))` (an App Attest key signs nothing else); the
   * key signs (ECDSA with SHA-256) Apple's nonce `SHA-256(authenticatorData || SHA-256(challenge))`,
   * as the service checks every assertion. Absent for android-key,
   * whose key signs the challenge itself (`Signature.getInstance("SHA256withECDSA")`).
   */
  authenticatorData?: Uint8Array;
}

/**
 * Whether `proof` was signed by the device key a verified result token names (`cnf.jwk`).
 * Pass the claims `verifyResultToken` resolved with: the token's own checks come first. Throws a
 * TypeError for a token that names no device key (Play Integrity results carry none) and for an
 * App Attest token without `authenticatorData`; a wrong or malformed signature is `false`.
 */
export function verifyPossession(
  claims: { service?: string; cnf?: { jwk: DeviceJwk } },
  proof: PossessionProof,
): boolean {
  const jwk = claims.cnf?.jwk;
  if (!jwk || typeof jwk !== 'object')
    throw new TypeError('this result token names no device key (cnf.jwk): nothing to check');
  if (claims.service === 'apple' && !proof.authenticatorData)
    throw new TypeError(
      'an App Attest key signs only assertions: pass the authenticatorData of the assertion made over SHA-256(challenge)',
    );
  let key;
  try {
    key = createPublicKey({ key: { ...jwk }, format: 'jwk' });
  } catch (err) {
    throw new TypeError(`cnf.jwk is not a public key: ${(err as Error).message}`, { cause: err });
  }
  const signed = proof.authenticatorData
    ? createHash('sha256')
        .update(proof.authenticatorData)
        .update(createHash('sha256').update(proof.challenge).digest())
        .digest()
    : proof.challenge;
  try {
    return verify('sha256', signed, key, proof.signature);
  } catch {
    return false; // not even a signature of that key's type
  }
}
