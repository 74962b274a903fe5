import { decodeBase64 } from '../base64.js';

/** Bytes of a SHA-256 signing-certificate digest. */
export const CERTIFICATE_DIGEST_BYTES = 32;

const HEX = /^[0-9a-fA-F]{64}$/;
const COLON_HEX = /^[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){31}$/;

/**
 * Parses a signing-certificate SHA-256 digest as an operator types it (`allowlist add android
 * --cert-digest`): hex in any case, bare or with `:` between every byte (the Play Console and
 * `keytool` form), or base64 / base64url of the 32 bytes (the form inside Play Integrity verdicts).
 * The forms cannot be confused: hex is 64 or 95 characters, base64 of 32 bytes 43 or 44.
 * @param text the digest; surrounding whitespace is ignored
 * @returns the 32 raw bytes, or `null` when `text` is none of those forms
 */
export function parseCertificateDigest(text: string): Uint8Array | null {
  const t = text.trim();
  if (HEX.test(t) || COLON_HEX.test(t))
    return new Uint8Array(Buffer.from(t.replaceAll(':', ''), 'hex'));
  const bytes = decodeBase64(t);
  return bytes !== null && bytes.length === CERTIFICATE_DIGEST_BYTES ? bytes : null;
}

/**
 * Formats a digest the way the Play Console shows it (upper-case hex, `:` between bytes), for listings.
 * @param digest raw digest bytes
 */
export function formatCertificateDigest(digest: Uint8Array): string {
  return Buffer.from(digest.buffer, digest.byteOffset, digest.byteLength)
    .toString('hex')
    .toUpperCase()
    .replace(/(..)(?!$)/g, '$1:');
}
