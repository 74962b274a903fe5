import { createHash, type KeyObject } from 'node:crypto';

// SubjectPublicKeyInfo of an EC P-256 key up to its uncompressed point: SEQUENCE { SEQUENCE { OID
// ecPublicKey, OID prime256v1 }, BIT STRING (66 bytes, 0 unused bits) }, then 0x04 || X || Y
const P256_SPKI_PREFIX = Buffer.from('3059301306072a8648ce3d020106082a8648ce3d030107034200', 'hex');
const P256_SPKI_LENGTH = P256_SPKI_PREFIX.length + 65;

/**
 * The App Attest key identifier of a public key: SHA-256 of its uncompressed EC point
 * `0x04 || X || Y`. `null` when the key is not an EC P-256 public key (App Attest keys always are).
 * @param publicKey a public KeyObject, e.g. the leaf certificate's
 */
export function appAttestKeyId(publicKey: KeyObject): Buffer | null {
  if (publicKey.type !== 'public') return null;
  return appAttestKeyIdOfSpki(publicKey.export({ type: 'spki', format: 'der' }));
}

/**
 * The same from the key's DER SubjectPublicKeyInfo, as OpenSSL exports it (one export serves
 * both the key id and the key store, where a JWK export, the curve lookup and an SPKI export
 * cost a registration three calls into OpenSSL).
 * @param spki DER SubjectPublicKeyInfo
 */
export function appAttestKeyIdOfSpki(spki: Uint8Array): Buffer | null {
  const der = Buffer.from(spki.buffer, spki.byteOffset, spki.byteLength);
  if (der.length !== P256_SPKI_LENGTH) return null;
  if (!der.subarray(0, P256_SPKI_PREFIX.length).equals(P256_SPKI_PREFIX)) return null;
  if (der[P256_SPKI_PREFIX.length] !== 0x04) return null;
  return createHash('sha256').update(der.subarray(P256_SPKI_PREFIX.length)).digest();
}
