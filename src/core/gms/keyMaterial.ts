import { createPublicKey } from 'node:crypto';
import type { webcrypto } from 'node:crypto';
import { decodeBase64 } from '../base64.js';

/** Bytes of a Play Integrity response decryption key (AES-256). */
export const DECRYPTION_KEY_BYTES = 32;

/**
 * Parses an operator's Play Integrity decryption key (`allowlist add android`): base64 of exactly
 * 32 bytes, as the Play Console shows it. Surrounding whitespace from a paste is ignored.
 * @param b64 base64 or base64url, padding optional
 * @returns the 32 raw key bytes
 * @throws Error with a message for the operator when the text is not such a key
 */
export function parseDecryptionKey(b64: string): Uint8Array {
  if (isPem(b64))
    throw new Error(
      `the decryption key is a PEM block; the Play Console shows it as one line of base64 (${DECRYPTION_KEY_BYTES} bytes)`,
    );
  const bytes = decodeBase64(b64.trim());
  if (bytes === null) throw new Error('the decryption key is not valid base64');
  if (bytes.length !== DECRYPTION_KEY_BYTES) {
    if (isPublicKey(bytes)) {
      throw new Error(
        'the decryption key is a public key, the verification key by its look: the two keys seem swapped',
      );
    }
    throw new Error(
      `the decryption key must be ${DECRYPTION_KEY_BYTES} bytes (AES-256), got ${bytes.length}`,
    );
  }
  return bytes;
}

/**
 * Parses both Play Integrity keys, naming the common mix-ups: PEM text instead of the Console's
 * base64, and the two keys given swapped.
 * @throws Error with a message for the operator
 */
export function parsePlayKeys(
  decryptionB64: string,
  verificationB64: string,
): { decryptionKey: Uint8Array; verificationKey: Uint8Array } {
  const dec = isPem(decryptionB64) ? null : decodeBase64(decryptionB64.trim());
  const ver = isPem(verificationB64) ? null : decodeBase64(verificationB64.trim());
  if (dec && ver && ver.length === DECRYPTION_KEY_BYTES && isPublicKey(dec)) {
    throw new Error(
      'the decryption and verification keys are swapped: the decryption key is the 32-byte one',
    );
  }
  return {
    decryptionKey: parseDecryptionKey(decryptionB64),
    verificationKey: parseVerificationKey(verificationB64),
  };
}

const isPem = (text: string) => text.includes('-----BEGIN');

function isPublicKey(der: Uint8Array): boolean {
  try {
    createPublicKey({ key: Buffer.from(der), format: 'der', type: 'spki' });
    return true;
  } catch {
    return false;
  }
}

/**
 * Parses an operator's Play Integrity verification key: base64 of a DER SubjectPublicKeyInfo
 * holding an EC P-256 public key, as the Play Console shows it. RSA keys and other curves are
 * refused, since the verifier only ever accepts ES256.
 * @param b64 base64 or base64url, padding optional
 * @returns the key as canonical DER SPKI (uncompressed point), so equal keys store as equal bytes
 * @throws Error with a message for the operator when the text is not such a key
 */
export function parseVerificationKey(b64: string): Uint8Array {
  if (isPem(b64)) {
    throw new Error(
      'the verification key is a PEM block; give the base64 the Play Console shows (the PEM body without its -----BEGIN/-----END lines, on one line)',
    );
  }
  const der = decodeBase64(b64.trim());
  if (der === null) throw new Error('the verification key is not valid base64');
  if (der.length === DECRYPTION_KEY_BYTES) {
    throw new Error(
      `the verification key is ${DECRYPTION_KEY_BYTES} bytes, the size of the decryption key: the two keys seem swapped`,
    );
  }
  let key;
  try {
    key = createPublicKey({ key: Buffer.from(der), format: 'der', type: 'spki' });
  } catch {
    throw new Error('the verification key is not a DER SubjectPublicKeyInfo public key');
  }
  if (key.asymmetricKeyType !== 'ec') {
    throw new Error(
      `the verification key must be an EC P-256 key, got ${key.asymmetricKeyType ?? 'an unknown'} key`,
    );
  }
  const curve = key.asymmetricKeyDetails?.namedCurve;
  if (curve !== 'prime256v1')
    throw new Error(
      `the verification key must be on curve P-256, got ${curve ?? 'an unknown curve'}`,
    );
  // through JWK and back: OpenSSL keeps a compressed point compressed, JWK always rebuilds the
  // uncompressed SPKI, so one key is always stored as the same 91 bytes
  const canonical = createPublicKey({ key: key.export({ format: 'jwk' }), format: 'jwk' });
  return new Uint8Array(canonical.export({ format: 'der', type: 'spki' }));
}

/**
 * Imports a decryption key for jose's A256KW (WebCrypto AES-KW, unwrap only, not extractable).
 * @param raw the 32 raw key bytes
 */
export async function importDecryptionKey(raw: Uint8Array): Promise<webcrypto.CryptoKey> {
  if (raw.length !== DECRYPTION_KEY_BYTES)
    throw new Error(`decryption key must be ${DECRYPTION_KEY_BYTES} bytes`);
  return crypto.subtle.importKey('raw', raw, { name: 'AES-KW', length: 256 }, false, ['unwrapKey']);
}

/**
 * Imports a verification key for jose's ES256 (WebCrypto ECDSA P-256, verify only).
 * WebCrypto refuses SPKI of another key type or curve, so a misfiled key cannot widen what verifies.
 * @param spki DER SubjectPublicKeyInfo of an EC P-256 key
 */
export async function importVerificationKey(spki: Uint8Array): Promise<webcrypto.CryptoKey> {
  return crypto.subtle.importKey('spki', spki, { name: 'ECDSA', namedCurve: 'P-256' }, false, [
    'verify',
  ]);
}
