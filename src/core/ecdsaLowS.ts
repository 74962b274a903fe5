/**
 * ECDSA signatures are malleable: (r, s) and (r, n - s) both verify. A result token's signature
 * is held to the low-S form (s <= n/2, as Bitcoin's BIP 62 and Ethereum's EIP-2 do), so each
 * token has one string: an RP that de-duplicates by token string cannot be handed the twin. Our
 * signer normalises what WebCrypto gives (either form, about half of each); consume, the client
 * and verify-file refuse the high-S form. jose checks the signature itself; this only compares
 * s, which carries no secret.
 */

/** The order n of P-256 (SEC 2, secp256r1). */
const P256_N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;
const HALF_N = P256_N >> 1n;

const bigOf = (bytes: Uint8Array): bigint =>
  bytes.length === 0 ? 0n : BigInt(`0x${Buffer.from(bytes).toString('hex')}`);

/** Whether a JWS ES256 signature (r || s, 64 bytes) has its s in the upper half of the order. */
export function isHighS(signature: Uint8Array): boolean {
  if (signature.length !== 64) return false; // not ES256's form: the signature check refuses it
  return bigOf(signature.subarray(32)) > HALF_N;
}

/** The compact JWS's signature part as bytes (empty when it has no third part). */
function signatureOf(jws: string): Uint8Array {
  const parts = jws.split('.');
  return parts.length === 3
    ? new Uint8Array(Buffer.from(parts[2]!, 'base64url'))
    : new Uint8Array();
}

/** Whether a compact ES256 JWS carries the high-S form of its signature. */
export function jwsHasHighS(jws: string): boolean {
  return isHighS(signatureOf(jws.trim()));
}

/** The same compact ES256 JWS with its signature in the low-S form (unchanged when it is already). */
export function lowSJws(jws: string): string {
  const signature = signatureOf(jws);
  if (!isHighS(signature)) return jws;
  const s = P256_N - bigOf(signature.subarray(32));
  const low = new Uint8Array(64);
  low.set(signature.subarray(0, 32));
  low.set(Buffer.from(s.toString(16).padStart(64, '0'), 'hex'), 32);
  return `${jws.slice(0, jws.lastIndexOf('.'))}.${Buffer.from(low).toString('base64url')}`;
}
