import { createHash, type JsonWebKey, type KeyObject } from 'node:crypto';

// RFC 5480 SubjectPublicKeyInfo of an EC P-256 key up to its point: SEQUENCE { SEQUENCE { OID
// ecPublicKey, OID prime256v1 }, BIT STRING (66 bytes, 0 unused bits) }, then 0x04 || X || Y
const P256_SPKI_PREFIX = Buffer.from('3059301306072a8648ce3d020106082a8648ce3d030107034200', 'hex');

/**
 * The uncompressed point `0x04 || X || Y` of an EC P-256 public key, or `null` for any other key.
 * Read through a JWK export: OpenSSL 3 exports a JWK in ~6 µs and an SPKI in ~110 µs, on every
 * registration.
 * @param publicKey a public KeyObject, e.g. the leaf certificate's
 */
export function p256Point(publicKey: KeyObject): Buffer | null {
  if (publicKey.type !== 'public' || publicKey.asymmetricKeyType !== 'ec') return null;
  let jwk: JsonWebKey;
  try {
    jwk = publicKey.export({ format: 'jwk' });
  } catch {
    // Node has no JWK form for some curves (brainpoolP256r1, secp224r1): not P-256 either
    return null;
  }
  if (jwk.crv !== 'P-256' || typeof jwk.x !== 'string' || typeof jwk.y !== 'string') return null;
  const x = Buffer.from(jwk.x, 'base64url');
  const y = Buffer.from(jwk.y, 'base64url');
  if (x.length !== 32 || y.length !== 32) return null;
  return Buffer.concat([Buffer.from([0x04]), x, y]);
}

/**
 * The uncompressed point of a P-256 key from its SubjectPublicKeyInfo DER when it has the one
 * form App Attest keys take (the prefix above, then `0x04 || X || Y`); `null` for any other, which
 * `p256Point` then reads from the key object. The same point as `p256Point`'s, without an export.
 * @param spki the DER SubjectPublicKeyInfo of a key OpenSSL decoded
 */
export function p256PointOfSpki(spki: Uint8Array): Buffer | null {
  const n = P256_SPKI_PREFIX.length;
  if (spki.length !== n + 65 || spki[n] !== 0x04) return null;
  if (!P256_SPKI_PREFIX.equals(spki.subarray(0, n))) return null;
  return Buffer.from(spki.subarray(n));
}

/**
 * The App Attest key identifier of a public key: SHA-256 of its uncompressed EC point
 * `0x04 || X || Y`. `null` when the key is not an EC P-256 public key (App Attest keys always are).
 * @param publicKey a public KeyObject, e.g. the leaf certificate's
 */
export function appAttestKeyId(publicKey: KeyObject): Buffer | null {
  const point = p256Point(publicKey);
  return point && appAttestKeyIdOfPoint(point);
}

/**
 * SHA-256 of an uncompressed P-256 point, from `p256Point`.
 * @param point 65 bytes, `0x04 || X || Y`
 */
export function appAttestKeyIdOfPoint(point: Uint8Array): Buffer {
  return createHash('sha256').update(point).digest();
}

/**
 * The DER SubjectPublicKeyInfo of a P-256 key (what the key store keeps), from its point: the
 * same bytes as OpenSSL's SPKI export, without its cost.
 * @param point 65 bytes, `0x04 || X || Y`, from `p256Point`
 */
export function p256Spki(point: Uint8Array): Buffer {
  if (point.length !== 65 || point[0] !== 0x04)
    throw new RangeError('an uncompressed P-256 point is 65 bytes starting with 0x04');
  return Buffer.concat([P256_SPKI_PREFIX, point]);
}
