import { createHash } from 'node:crypto';

/** A short public fingerprint of a Play Integrity key pair: never the key material itself. */
export function keyPairId(decryptionKey: Uint8Array, verificationKey: Uint8Array): string {
  return createHash('sha256')
    .update(decryptionKey)
    .update(verificationKey)
    .digest('hex')
    .slice(0, 16);
}
