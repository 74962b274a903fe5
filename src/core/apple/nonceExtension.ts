/**
 * The App Attest nonce: `SHA-256(authData || clientDataHash)`, which Apple writes into the leaf
 * certificate's extension 1.2.840.113635.100.8.2 as `SEQUENCE { [1] EXPLICIT OCTET STRING }`.
 *
 * Node's X509Certificate cannot list extensions, so @peculiar's ASN.1 schema for X.509 reads the
 * extension's value (the schema parse alone: @peculiar/x509's certificate object also builds
 * names, keys and typed extensions, twice the CPU, and this runs on every registration). The value is then compared with the DER encoding of the expected nonce as a whole:
 * DER has exactly one encoding of that structure, so equal bytes mean an equal nonce, and no
 * looser reading (extra fields, long-form lengths) can slip through.
 */
import { createHash } from 'node:crypto';
import { AsnParser } from '@peculiar/asn1-schema';
import { Certificate } from '@peculiar/asn1-x509';

export const APPLE_NONCE_EXTENSION_OID = '1.2.840.113635.100.8.2';

const NONCE_LENGTH = 32;
// SEQUENCE (0x30, 36 bytes) { [1] EXPLICIT (0xa1, 34 bytes) { OCTET STRING (0x04, 32 bytes) } }
const NONCE_EXTENSION_HEADER = Buffer.from([0x30, 0x24, 0xa1, 0x22, 0x04, 0x20]);

/**
 * The App Attest nonce: SHA-256 of authData followed by clientDataHash. An attestation carries
 * it in its leaf certificate; an assertion signs it.
 * @param authData the authData (attestation) or authenticatorData (assertion) bytes
 * @param clientDataHash what the device passed to `attestKey` / `generateAssertion` (32 bytes from this service's SDKs,
 *   any length from other integrations)
 */
export function appAttestNonce(authData: Uint8Array, clientDataHash: Uint8Array): Buffer {
  return createHash('sha256').update(authData).update(clientDataHash).digest();
}

/**
 * The DER value extension 1.2.840.113635.100.8.2 holds for a given nonce.
 * @param nonce 32 bytes, from `appAttestNonce`
 */
export function nonceExtensionValue(nonce: Uint8Array): Buffer {
  if (nonce.length !== NONCE_LENGTH)
    throw new RangeError(`an App Attest nonce is ${NONCE_LENGTH} bytes`);
  return Buffer.concat([NONCE_EXTENSION_HEADER, nonce]);
}

/**
 * The raw value of the leaf's nonce extension, or `null` when the certificate has none (or
 * cannot be read).
 * @param leafDer the leaf certificate (`x5c[0]`) as DER
 */
export function readNonceExtensionValue(leafDer: Uint8Array): Buffer | null {
  let cert: Certificate;
  try {
    cert = AsnParser.parse(leafDer, Certificate);
  } catch {
    return null;
  }
  const extension = cert.tbsCertificate.extensions?.find(
    (e) => e.extnID === APPLE_NONCE_EXTENSION_OID,
  );
  return extension ? Buffer.from(extension.extnValue.buffer) : null;
}

/**
 * The 32-byte nonce in the leaf's extension, or `null` when it is absent or not of Apple's shape.
 * For diagnostics (`verify-file` hints); verification compares whole values instead.
 * @param leafDer the leaf certificate (`x5c[0]`) as DER
 */
export function readAttestedNonce(leafDer: Uint8Array): Buffer | null {
  const value = readNonceExtensionValue(leafDer);
  if (!value || value.length !== NONCE_EXTENSION_HEADER.length + NONCE_LENGTH) return null;
  if (!value.subarray(0, NONCE_EXTENSION_HEADER.length).equals(NONCE_EXTENSION_HEADER)) return null;
  return value.subarray(NONCE_EXTENSION_HEADER.length);
}
