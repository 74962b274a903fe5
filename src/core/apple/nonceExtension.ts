/**
 * The App Attest nonce: `SHA-256(authData || clientDataHash)`, which Apple writes into the leaf
 * certificate's extension 1.2.840.113635.100.8.2 as `SEQUENCE { [1] EXPLICIT OCTET STRING }`.
 *
 * Node's X509Certificate cannot list extensions, so asn1js decodes the leaf and the extension is
 * found by walking tbsCertificate, without matching the whole X.509 schema (a schema parse,
 * @peculiar/asn1-x509, cost ~0.58 ms per leaf; this ~0.2-0.39 ms). Verification reads the bytes
 * OpenSSL parsed and verified (`X509Certificate.raw`, which the chain check requires to equal
 * x5c[0]), so what is read here is what Apple signed.
 * The value is then compared with the DER encoding of the expected nonce as a whole:
 * DER has exactly one encoding of that structure, so equal bytes mean an equal nonce, and no
 * looser reading (extra fields, long-form lengths) can slip through.
 */
import { createHash } from 'node:crypto';
import { fromBER, ObjectIdentifier, OctetString, Sequence, type AsnType } from 'asn1js';

export const APPLE_NONCE_EXTENSION_OID = '1.2.840.113635.100.8.2';
/** macOS 27 App Attest leaves carry the key's access-control blob under this OID. */
export const APPLE_KEY_ACCESS_CONTROL_OID = '1.2.840.113635.100.8.6';
/** Apple's OS information extension: the OS name (`iphoneos`...), version and build that made the key. */
export const APPLE_OS_INFO_OID = '1.2.840.113635.100.8.7';
/** The OS name's field in the OS information: context tag 1026, an OCTET STRING of ASCII. */
const OS_NAME_TAG = 1026;
/** The most of the OS information read: Apple's is about 210 bytes. */
const MAX_OS_INFO_BYTES = 2048;

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
  return readLeafNonceAndKey(leafDer).nonceExtension;
}

/** What verification reads of the leaf with asn1js. */
export interface LeafNonceAndKey {
  /** the nonce extension's raw value; `null` when absent or the leaf is unreadable */
  nonceExtension: Buffer | null;
  /** the DER SubjectPublicKeyInfo; `null` when the leaf is unreadable */
  spki: Buffer | null;
  /**
   * the key access-control extension's values (macOS keys have one), in order; not read further.
   * Null when the leaf is unreadable, or a value is not an OCTET STRING.
   */
  accessControl: Buffer[] | null;
  /**
   * the OS name in Apple's OS information extension (`iphoneos` on an iPhone or iPad), lower
   * case, at most 32 printable characters; null when absent or unreadable
   */
  osName: string | null;
}

/**
 * The nonce extension's value and the SubjectPublicKeyInfo, from one decoding of the leaf: the
 * key's point is then read from the bytes OpenSSL decoded, not exported from its key object again.
 * @param leafDer the leaf certificate (`x5c[0]`) as DER
 */
export function readLeafNonceAndKey(leafDer: Uint8Array): LeafNonceAndKey {
  const none = { nonceExtension: null, spki: null, accessControl: null, osName: null };
  try {
    // no re-parsing of OCTET and BIT STRING contents as ASN.1 (asn1js's default): their bytes are
    // random (keys, the nonce), and the walk below reads the extension's value whole
    const parsed = fromBER(leafDer, {
      maxDepth: 16,
      maxNodes: 512,
      // room for a key access-control blob beyond its own bound (keyAccessControl.ts), which
      // then refuses it by name instead of leaving the whole leaf unreadable
      maxContentLength: 16384,
      parseEmbedded: false,
    });
    // exactly one element: bytes after the certificate are not part of what was verified
    if (parsed.offset !== leafDer.byteLength) return none;
    const tbs = children(children(parsed.result)?.[0]);
    if (!tbs) return none;
    // version is tbsCertificate's optional [0] EXPLICIT field; subjectPublicKeyInfo the 6th after it
    const versioned = isContext(tbs[0], 0) ? 1 : 0;
    const key = tbs[versioned + 5];
    const spki = key instanceof Sequence ? Buffer.from(key.valueBeforeDecodeView) : null;
    // extensions are tbsCertificate's [3] EXPLICIT field, a SEQUENCE of Extension
    const tagged = tbs.find((f) => isContext(f, 3));
    const list = children(children(tagged)?.[0]);
    let nonceExtension: Buffer | null = null;
    let nonceSeen = false;
    let accessControl: Buffer[] | null = [];
    let osName: string | null = null;
    for (const extension of list ?? []) {
      // Extension ::= SEQUENCE { extnID OID, critical BOOLEAN DEFAULT FALSE, extnValue OCTET STRING }
      const fields = children(extension);
      const id = fields?.[0];
      const value = fields?.[fields.length - 1];
      if (!(id instanceof ObjectIdentifier)) continue;
      const oid = id.valueBlock.toString();
      const bytes =
        value instanceof OctetString ? Buffer.from(value.valueBlock.valueHexView) : null;
      // the first nonce extension, as before: a second one cannot equal the expected value twice
      if (oid === APPLE_NONCE_EXTENSION_OID && !nonceSeen) {
        nonceSeen = true;
        nonceExtension = bytes;
      } else if (oid === APPLE_KEY_ACCESS_CONTROL_OID) {
        if (bytes && accessControl) accessControl.push(bytes);
        else accessControl = null;
      } else if (oid === APPLE_OS_INFO_OID && bytes) {
        osName = readOsName(bytes);
      }
    }
    return { nonceExtension, spki, accessControl, osName };
  } catch {
    // asn1js throws on some malformed contents (e.g. an unreadable time): unreadable is "none"
    return none;
  }
}

/**
 * The OS name field of Apple's OS information extension (a SEQUENCE of context-tagged fields),
 * bounded before it is read; null when it is not there or not printable.
 */
function readOsName(info: Buffer): string | null {
  if (info.length > MAX_OS_INFO_BYTES) return null;
  try {
    const parsed = fromBER(info, { maxDepth: 4, maxNodes: 128, parseEmbedded: false });
    for (const field of children(parsed.result) ?? []) {
      if (field.idBlock.tagClass !== 3 || field.idBlock.tagNumber !== OS_NAME_TAG) continue;
      const inner = children(field)?.[0];
      if (!(inner instanceof OctetString)) return null;
      const text = Buffer.from(inner.valueBlock.valueHexView).toString('latin1');
      return /^[\x20-\x7e]{1,32}$/.test(text) ? text.toLowerCase() : null;
    }
    return null;
  } catch {
    return null;
  }
}

function isContext(node: AsnType | undefined, tag: number): boolean {
  return node?.idBlock.tagClass === CONTEXT_SPECIFIC && node.idBlock.tagNumber === tag;
}

const CONTEXT_SPECIFIC = 3;

/** The elements of a constructed value (SEQUENCE, explicit tag), or `undefined`. */
function children(node: AsnType | undefined): AsnType[] | undefined {
  const value = (node?.valueBlock as { value?: unknown } | undefined)?.value;
  return Array.isArray(value) ? (value as AsnType[]) : undefined;
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
