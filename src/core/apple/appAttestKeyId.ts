import { createHash, type KeyObject } from 'node:crypto';

/**
 * The App Attest key identifier of a public key: SHA-256 of its uncompressed EC point
 * `0x04 || X || Y`. `null` when the key is not an EC P-256 public key (App Attest keys always are).
 * @param publicKey a public KeyObject, e.g. the leaf certificate's
 */
export function appAttestKeyId(publicKey: KeyObject): Buffer | null {
  if (publicKey.type !== 'public' || publicKey.asymmetricKeyType !== 'ec') return null;
  if (publicKey.asymmetricKeyDetails?.namedCurve !== 'prime256v1') return null;
  const jwk = publicKey.export({ format: 'jwk' });
  if (typeof jwk.x !== 'string' || typeof jwk.y !== 'string') return null;
  const point = Buffer.concat([
    Buffer.from([0x04]),
    Buffer.from(jwk.x, 'base64url'),
    Buffer.from(jwk.y, 'base64url'),
  ]);
  return createHash('sha256').update(point).digest();
}
