/**
 * Strict base64 (RFC 4648 section 4, or the URL-safe alphabet of section 5; padding optional).
 * `Buffer.from(s, 'base64')` skips characters it does not know and ignores bad padding, so the
 * shape is checked first and the decode is checked to round-trip (no stray trailing bits).
 */
const STANDARD = /^[A-Za-z0-9+/]*={0,2}$/;
const URL_SAFE = /^[A-Za-z0-9_-]*={0,2}$/;

/** Decodes strict base64 or base64url; `null` when `text` is empty or not exactly that. */
export function decodeBase64(text: string): Uint8Array | null {
  if (text.length === 0) return null;
  if (!STANDARD.test(text) && !URL_SAFE.test(text)) return null;
  const body = text.replace(/=+$/, '');
  const padding = text.length - body.length;
  if (body.length % 4 === 1) return null;
  if (padding > 0 && text.length % 4 !== 0) return null;
  const bytes = Buffer.from(body.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
  // non-zero bits in the last character's unused part would be silently dropped: refuse them
  if (bytes.toString('base64').replace(/=+$/, '') !== body.replace(/-/g, '+').replace(/_/g, '/'))
    return null;
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Standard base64 with padding. */
export function encodeBase64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
}

/** base64url without padding (Play Integrity's nonce form). */
export function encodeBase64Url(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64url');
}
