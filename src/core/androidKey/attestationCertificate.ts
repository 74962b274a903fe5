/**
 * One certificate of an Android attestation chain, read twice from the same bytes: by OpenSSL
 * (node:crypto, which verifies signatures) and by asn1js (names, serial, key and extensions).
 * Only an exact DER certificate is accepted, so both read the bytes the issuer's signature covers.
 */
import { X509Certificate } from 'node:crypto';
import type * as asn1js from 'asn1js';
import { Rejection } from '../reasons.js';
import { children, decodeOne } from './keyDescription.js';

export interface AttestationCertificate {
  der: Buffer;
  cert: X509Certificate;
  /** the serial number as a (two's complement) integer */
  serial: bigint;
  /** the OID of the signature algorithm its issuer signed it with (Certificate.signatureAlgorithm) */
  signatureAlgorithm: string;
  /** DER of the issuer and subject names and of the SubjectPublicKeyInfo */
  issuer: Buffer;
  subject: Buffer;
  spki: Buffer;
  /** extension values (the OCTET STRING contents) by OID; a list, since an OID may repeat */
  extensions: Map<string, Uint8Array[]>;
  notBefore: Date;
  notAfter: Date;
  /**
   * the subject's attributes as text (type OID and string value), in order; values that are
   * not strings are left out. Google's verifier reads the security level and the provisioning
   * from them, and factory intermediates carry their own serial number there (2.5.4.5).
   */
  subjectAttributes: readonly SubjectAttribute[];
}

export interface SubjectAttribute {
  oid: string;
  value: string;
}

/** X.520 attribute types Google's verifier reads in subjects. */
export const NAME_OIDS = {
  commonName: '2.5.4.3',
  serialNumber: '2.5.4.5',
  organization: '2.5.4.10',
  title: '2.5.4.12',
} as const;

/** The most attributes read from a subject (real ones hold 1 to 5). */
const MAX_SUBJECT_ATTRIBUTES = 16;
const MAX_ATTRIBUTE_CHARS = 256;

const raw = (v: asn1js.AsnType) => Buffer.from(v.valueBeforeDecodeView);

/**
 * The largest certificate of an attestation chain read: the real ones are 0.5 to 2.6 KB (an
 * ML-DSA leaf is the largest), so 8 KiB leaves room for bigger keys and key descriptions while
 * a chain of ten stays far below what the parsers would take.
 */
export const MAX_CERTIFICATE_BYTES = 8 * 1024;

/**
 * Reads one certificate. Throws `Rejection('android_key_malformed')` unless `der` is exactly one
 * DER certificate both readers accept.
 * @param der the bytes of one `certificateChain` entry
 * @param what names it in the rejection (`certificateChain[1]`)
 */
export function readAttestationCertificate(der: Uint8Array, what: string): AttestationCertificate {
  const fail = (detail: string): never => {
    throw new Rejection('android_key_malformed', `${what} ${detail}`);
  };
  const bytes = Buffer.from(der.buffer, der.byteOffset, der.byteLength);
  if (bytes.length > MAX_CERTIFICATE_BYTES)
    fail(
      `is ${bytes.length} bytes: more than any attestation certificate (${MAX_CERTIFICATE_BYTES})`,
    );
  // OpenSSL's PEM reader skips text before a BEGIN line and its DER reader ignores trailing bytes
  if (bytes[0] !== 0x30) fail('is not a DER certificate (PEM text, or bytes before it)');
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(bytes);
  } catch {
    return fail('is not a readable X.509 certificate');
  }
  if (!cert.raw.equals(bytes)) fail('is not exactly one DER certificate (bytes around it)');

  const top = decodeOne(bytes, what);
  const [tbs, algorithm] = children(top);
  if (!tbs) return fail('has no TBSCertificate');
  const signatureAlgorithm = (
    (algorithm && children(algorithm)[0]) as asn1js.ObjectIdentifier | undefined
  )?.valueBlock?.toString?.();
  if (!signatureAlgorithm) return fail('has an unreadable signature algorithm');
  const parts = children(tbs);
  // version [0] is optional (v1 certificates leave it out)
  const offset = parts[0]?.idBlock.tagClass === 3 && parts[0].idBlock.tagNumber === 0 ? 1 : 0;
  const [serialField, , issuer, , subject, spki] = parts.slice(offset);
  if (!serialField || !issuer || !subject || !spki) return fail('has a short TBSCertificate');
  const serialBytes = (serialField as asn1js.Integer).valueBlock.valueHexView;
  let serial = 0n;
  for (const b of serialBytes) serial = (serial << 8n) | BigInt(b);
  if (serialBytes.length > 0 && serialBytes[0]! & 0x80)
    serial -= 1n << BigInt(8 * serialBytes.length);

  const extensions = new Map<string, Uint8Array[]>();
  const wrapper = parts
    .slice(offset + 6)
    .find((p) => p.idBlock.tagClass === 3 && p.idBlock.tagNumber === 3);
  if (wrapper) {
    const [list] = children(wrapper);
    for (const extension of list ? children(list) : []) {
      const fields = children(extension);
      const oid = (fields[0] as asn1js.ObjectIdentifier | undefined)?.valueBlock?.toString?.();
      const value = fields.at(-1) as asn1js.OctetString | undefined;
      if (!oid || !value || value.idBlock.tagNumber !== 4 || value.idBlock.tagClass !== 1)
        return fail('has an unreadable extension');
      const values = extensions.get(oid) ?? [];
      values.push(new Uint8Array(value.valueBlock.valueHexView));
      extensions.set(oid, values);
    }
  }

  const subjectAttributes = readSubjectAttributes(subject, fail);

  const notBefore = new Date(cert.validFrom);
  const notAfter = new Date(cert.validTo);
  if (Number.isNaN(notBefore.getTime()) || Number.isNaN(notAfter.getTime()))
    fail('has an unreadable validity period');
  return {
    der: bytes,
    cert,
    serial,
    signatureAlgorithm,
    issuer: raw(issuer),
    subject: raw(subject),
    spki: raw(spki),
    extensions,
    notBefore,
    notAfter,
    subjectAttributes,
  };
}

/** The elements of a constructed value; none for a primitive one. */
function items(v: asn1js.AsnType | undefined): asn1js.AsnType[] {
  const value = (v?.valueBlock as { value?: unknown } | undefined)?.value;
  return Array.isArray(value) ? (value as asn1js.AsnType[]) : [];
}

/**
 * A Name's attributes: RDNSequence, each RDN a SET of SEQUENCE { type OID, value }. The name was
 * decoded within the certificate's node limit; at most MAX_SUBJECT_ATTRIBUTES are read.
 */
function readSubjectAttributes(name: asn1js.AsnType, fail: (detail: string) => never) {
  const out: SubjectAttribute[] = [];
  for (const rdn of items(name)) {
    for (const pair of items(rdn)) {
      if (out.length >= MAX_SUBJECT_ATTRIBUTES)
        fail(`has more than ${MAX_SUBJECT_ATTRIBUTES} subject attributes`);
      const [type, value] = items(pair);
      const oid = (type as asn1js.ObjectIdentifier | undefined)?.valueBlock?.toString?.();
      const text = (value?.valueBlock as { value?: unknown } | undefined)?.value;
      if (!oid || typeof text !== 'string') continue;
      out.push({ oid, value: text.slice(0, MAX_ATTRIBUTE_CHARS) });
    }
  }
  return out;
}

/** A serial number as Google's status list writes it: lowercase hex without leading zeros. */
export function serialHex(serial: bigint): string {
  return serial < 0n ? `-${(-serial).toString(16)}` : serial.toString(16);
}
