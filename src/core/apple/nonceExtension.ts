/**
 * The App Attest nonce: `SHA-256(authData || clientDataHash)`, which Apple writes into the leaf
 * certificate's extension 1.2.840.113635.100.8.2 as `SEQUENCE { [1] EXPLICIT OCTET STRING }`.
 *
 * Node's X509Certificate cannot list extensions, so @peculiar/x509 extracts the extension's
 * value. The value is then compared with the DER encoding of the expected nonce as a whole:
 * DER has exactly one encoding of that structure, so equal bytes mean an equal nonce, and no
 * looser reading (extra fields, long-form lengths) can slip through.
 */
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';

type PeculiarX509 = typeof import('@peculiar/x509');
let peculiar: PeculiarX509 | undefined;

/**
 * @peculiar/x509, loaded on first use: it is the costliest module of a start (a third of a second
 * of CPU), and only attestations need it. `attest serve` loads it once it listens.
 */
export function peculiarX509(): PeculiarX509 {
  peculiar ??= createRequire(import.meta.url)('@peculiar/x509') as PeculiarX509;
  return peculiar;
}

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
  if (nonce.length !== NONCE_LENGTH) throw new RangeError(`an App Attest nonce is ${NONCE_LENGTH} bytes`);
  return Buffer.concat([NONCE_EXTENSION_HEADER, nonce]);
}

/**
 * The raw value of the leaf's nonce extension, or `null` when the certificate has none (or
 * cannot be read).
 * @param leafDer the leaf certificate (`x5c[0]`) as DER
 */
export function readNonceExtensionValue(leafDer: Uint8Array): Buffer | null {
  const { X509Certificate: PeculiarCertificate } = peculiarX509();
  let cert: InstanceType<typeof PeculiarCertificate>;
  try {
    cert = new PeculiarCertificate(leafDer);
  } catch {
    return null;
  }
  const extension = cert.getExtension(APPLE_NONCE_EXTENSION_OID);
  return extension ? Buffer.from(extension.value) : null;
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
