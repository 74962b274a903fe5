/**
 * Reading an App Attest receipt's structure, bounded before anything is decoded: the CMS
 * SignedData's parts (content, certificates, the SignerInfo), each certificate as node:crypto
 * reads it, and the attributes of the signed content. Nothing here checks a signature or a
 * chain: that is verifyReceipt.ts's one fixed path. Every problem is a string, never a throw.
 */
import { createHash, type KeyObject, X509Certificate } from 'node:crypto';
import * as asn1js from 'asn1js';
import { BerError, type BerNode, isContext, isUniversal, outlineBer } from '../berOutline.js';
import { keyProfileProblem } from './keyProfile.js';

/** `ATTEST` in an attestation's receipt; `RECEIPT` in one traded at Apple's data endpoint. */
export type ReceiptType = 'ATTEST' | 'RECEIPT';

/** The attributes of a receipt, as read from its signed content. */
export interface ReceiptFacts {
  /** field 6 */
  type: string;
  /** field 2: `TEAMID.bundle.id` */
  appId: string;
  /** field 3: the attested key's certificate (DER), `x5c[0]` of the attestation */
  attestedCertificate: Uint8Array;
  /** field 4 */
  clientHash: Uint8Array | null;
  /** field 5 */
  token: string | null;
  /** field 7 (`sandbox` or `production`; not in Apple's list, present in every real receipt) */
  environment: string | null;
  /** field 12 */
  creationTime: Date;
  /** field 19: Apple refreshes no sooner (refreshed receipts only) */
  notBefore: Date | null;
  /** field 21 */
  expirationTime: Date | null;
  /** field 17: attestations for this device and app over 30 days (refreshed receipts only) */
  riskMetric: number | null;
}

export const oidDer = (oid: string) =>
  Buffer.from(new asn1js.ObjectIdentifier({ value: oid }).toBER(false)).toString('hex');
export const OID_SIGNED_DATA = oidDer('1.2.840.113549.1.7.2');
export const OID_DATA = oidDer('1.2.840.113549.1.7.1');
export const OID_CONTENT_TYPE = oidDer('1.2.840.113549.1.9.3');
export const OID_MESSAGE_DIGEST = oidDer('1.2.840.113549.1.9.4');
/** Apple's marker extension on the receipt signing certificate */
export const OID_FRAUD_RECEIPT_SIGNER = oidDer('1.2.840.113635.100.12.15');
export const DIGESTS = new Map([
  [oidDer('2.16.840.1.101.3.4.2.1'), 'sha256'],
  [oidDer('2.16.840.1.101.3.4.2.2'), 'sha384'],
  [oidDer('2.16.840.1.101.3.4.2.3'), 'sha512'],
]);
/** signature algorithms: the key type and, for the `with` forms, the hash they fix */
export const SIGNATURES = new Map<string, { key: 'ec' | 'rsa'; hash: string | null }>([
  [oidDer('1.2.840.10045.4.3.2'), { key: 'ec', hash: 'sha256' }],
  [oidDer('1.2.840.10045.4.3.3'), { key: 'ec', hash: 'sha384' }],
  [oidDer('1.2.840.10045.4.3.4'), { key: 'ec', hash: 'sha512' }],
  [oidDer('1.2.840.113549.1.1.1'), { key: 'rsa', hash: null }],
  [oidDer('1.2.840.113549.1.1.11'), { key: 'rsa', hash: 'sha256' }],
  [oidDer('1.2.840.113549.1.1.12'), { key: 'rsa', hash: 'sha384' }],
  [oidDer('1.2.840.113549.1.1.13'), { key: 'rsa', hash: 'sha512' }],
]);

// Apple's receipts are about 4 KiB with three certificates (signer, intermediate, a copy of the
// root) of under 1 KiB each, nested 11 deep, about 400 elements. The bounds leave room, no more.
export const MAX_RECEIPT_BYTES = 32 * 1024;
export const RECEIPT_LIMITS = { maxDepth: 16, maxNodes: 1500 };
export const MAX_CERTIFICATES = 4;
export const MAX_CERTIFICATE_BYTES = 4096;
export const CERTIFICATE_LIMITS = { maxDepth: 12, maxNodes: 500 };
// the signed content: a SET of SEQUENCE { INTEGER, INTEGER, OCTET STRING }, about 12 of them
export const CONTENT_LIMITS = { maxDepth: 4, maxNodes: 400 };

export const FIELD = {
  appId: 2,
  attestedCertificate: 3,
  clientHash: 4,
  token: 5,
  type: 6,
  environment: 7,
  creationTime: 12,
  riskMetric: 17,
  notBefore: 19,
  expirationTime: 21,
} as const;

/** A certificate of a receipt (or a root), read once and kept by its bytes. */
export interface ReadCertificate {
  hash: string;
  x509: X509Certificate;
  /** DER of the issuer and subject Names and of the serial INTEGER, as the certificate holds them */
  issuer: Buffer;
  subject: Buffer;
  serial: Buffer;
  receiptSigner: boolean;
  publicKey: KeyObject;
  keyProblem: string | null;
  notBefore: Date;
  notAfter: Date;
}

/** What the SignerInfo says, located and checked for shape. */
export interface SignerParts {
  issuer: Buffer;
  serial: Buffer;
  digest: string;
  signature: { key: 'ec' | 'rsa'; hash: string; bytes: Buffer };
  /** DER of the signed attributes as a SET (what the signature covers), when there are any */
  signedAttributes: Buffer | null;
  messageDigest: Buffer | null;
}

export interface ReceiptStructure {
  content: Buffer;
  certificates: Buffer[];
  signer: SignerParts;
}

/** The ContentInfo's SignedData, located and checked for shape and bounds; a string is the problem. */
export function readStructure(input: Uint8Array): ReceiptStructure | string {
  if (input.length === 0) return 'the receipt is empty';
  if (input.length > MAX_RECEIPT_BYTES)
    return `the receipt is ${input.length} bytes, more than ${MAX_RECEIPT_BYTES}`;
  const bytes = Buffer.from(input.buffer, input.byteOffset, input.byteLength);
  let info: BerNode;
  try {
    info = outlineBer(bytes, RECEIPT_LIMITS);
  } catch (err) {
    if (err instanceof BerError) return `not BER: ${err.message}`;
    throw err;
  }
  if (info.end !== bytes.length)
    return `${bytes.length - info.end} bytes follow the CMS ContentInfo`;
  const slice = (n: BerNode) => bytes.subarray(n.start, n.end);
  const oidIs = (n: BerNode | undefined, der: string) =>
    isUniversal(n, 6) && !n.constructed && slice(n).toString('hex') === der;

  // ContentInfo ::= SEQUENCE { contentType OID, content [0] EXPLICIT ANY }
  const [contentType, explicitContent] = info.children;
  if (!isUniversal(info, 16) || !isUniversal(contentType, 6))
    return 'not a CMS ContentInfo (RFC 5652)';
  if (!oidIs(contentType, OID_SIGNED_DATA))
    return `the ContentInfo holds ${oidText(slice(contentType))}, not SignedData`;
  const signedData = explicitContent?.children[0];
  if (!isContext(explicitContent, 0) || !isUniversal(signedData, 16))
    return 'the ContentInfo holds no SignedData';

  // SignedData ::= SEQUENCE { version, digestAlgorithms SET, encapContentInfo,
  //   [0] certificates OPTIONAL, [1] crls OPTIONAL, signerInfos SET }
  const fields = signedData.children;
  const encap = fields[2];
  const signerInfos = fields[fields.length - 1];
  if (fields.length < 4 || !isUniversal(encap, 16) || !isUniversal(signerInfos, 17))
    return 'the SignedData is not SEQUENCE { version, digestAlgorithms, encapContentInfo, ..., signerInfos }';
  if (signerInfos.children.length !== 1)
    return `the SignedData has ${signerInfos.children.length} signers, not one`;
  const certificateSet = fields.slice(3, -1).find((f) => isContext(f, 0));
  if (!certificateSet || certificateSet.children.length === 0)
    return 'the SignedData carries no certificates';
  if (certificateSet.children.length > MAX_CERTIFICATES)
    return `the SignedData carries ${certificateSet.children.length} certificates, more than ${MAX_CERTIFICATES}`;
  const certificates: Buffer[] = [];
  for (const c of certificateSet.children) {
    if (!isUniversal(c, 16) || c.indefinite) return 'a certificate of the SignedData is not DER';
    if (c.end - c.start > MAX_CERTIFICATE_BYTES)
      return `a certificate of the SignedData is ${c.end - c.start} bytes, more than ${MAX_CERTIFICATE_BYTES}`;
    certificates.push(slice(c));
  }

  // EncapsulatedContentInfo ::= SEQUENCE { eContentType OID, eContent [0] EXPLICIT OCTET STRING }
  const [eContentType, eContent] = encap.children;
  if (!isUniversal(eContentType, 6)) return 'the signed content has no type';
  if (!oidIs(eContentType, OID_DATA))
    return `the signed content type is ${oidText(slice(eContentType))}, not data`;
  // BER lets an OCTET STRING come in primitive pieces (Apple sends 1000-byte ones)
  const content = octetString(eContent?.children[0], bytes);
  if (!isContext(eContent, 0) || content === null) return 'the signed content is missing';

  const signer = readSignerInfo(signerInfos.children[0]!, bytes);
  if (typeof signer === 'string') return signer;
  return { content, certificates, signer };
}

/**
 * SignerInfo ::= SEQUENCE { version, sid, digestAlgorithm, [0] signedAttrs OPTIONAL,
 *   signatureAlgorithm, signature OCTET STRING, [1] unsignedAttrs OPTIONAL }
 */
export function readSignerInfo(info: BerNode, bytes: Buffer): SignerParts | string {
  const slice = (n: BerNode) => bytes.subarray(n.start, n.end);
  const fields = info.children;
  if (!isUniversal(info, 16) || fields.length < 5)
    return 'the SignerInfo is not a SEQUENCE of its fields';
  const [, sid, digestAlgorithm] = fields;
  const withAttributes = isContext(fields[3], 0);
  const signedAttrs = withAttributes ? fields[3]! : null;
  const signatureAlgorithm = fields[withAttributes ? 4 : 3];
  const signature = fields[withAttributes ? 5 : 4];
  // sid: IssuerAndSerialNumber ::= SEQUENCE { issuer Name, serialNumber INTEGER } (Apple's form)
  const [issuer, serial] = sid?.children ?? [];
  if (!isUniversal(sid, 16) || !isUniversal(issuer, 16) || !isUniversal(serial, 2))
    return 'the SignerInfo does not name its signer by issuer and serial number';
  const digestOid = digestAlgorithm?.children[0];
  const digest = digestOid && DIGESTS.get(slice(digestOid).toString('hex'));
  if (!isUniversal(digestAlgorithm, 16) || !digest)
    return 'the SignerInfo digest algorithm is not SHA-256, SHA-384 or SHA-512';
  const signatureOid = signatureAlgorithm?.children[0];
  const algorithm = signatureOid && SIGNATURES.get(slice(signatureOid).toString('hex'));
  if (!isUniversal(signatureAlgorithm, 16) || !algorithm)
    return 'the SignerInfo signature algorithm is not ECDSA or RSA with SHA-2';
  if (!isUniversal(signature, 4) || signature.constructed)
    return 'the SignerInfo signature is not an OCTET STRING';

  let signedAttributes: Buffer | null = null;
  let messageDigest: Buffer | null = null;
  if (signedAttrs) {
    // the signature covers their DER with a SET tag (RFC 5652 5.4): they must have come as DER
    if (signedAttrs.indefinite) return 'the signed attributes are not DER';
    signedAttributes = Buffer.from(slice(signedAttrs));
    signedAttributes[0] = 0x31;
    let contentTypeSeen = false;
    for (const attribute of signedAttrs.children) {
      // Attribute ::= SEQUENCE { attrType OID, attrValues SET OF ANY }
      const [type, values] = attribute.children;
      if (!isUniversal(attribute, 16) || !isUniversal(type, 6) || !isUniversal(values, 17))
        return 'a signed attribute is not SEQUENCE { OID, SET }';
      const typeHex = slice(type).toString('hex');
      const [value] = values.children;
      if (typeHex === OID_MESSAGE_DIGEST) {
        if (
          messageDigest ||
          values.children.length !== 1 ||
          !isUniversal(value, 4) ||
          value.constructed
        )
          return 'the message digest attribute is not one OCTET STRING';
        messageDigest = bytes.subarray(value.contentStart, value.contentEnd);
      } else if (typeHex === OID_CONTENT_TYPE) {
        if (
          contentTypeSeen ||
          values.children.length !== 1 ||
          slice(value!).toString('hex') !== OID_DATA
        )
          return 'the content type attribute is not one "data"';
        contentTypeSeen = true;
      }
    }
    if (!messageDigest || !contentTypeSeen)
      return 'the signed attributes lack the content type or the message digest (RFC 5652 5.3)';
  }
  return {
    issuer: slice(issuer),
    serial: slice(serial),
    digest,
    signature: {
      key: algorithm.key,
      hash: algorithm.hash ?? digest,
      bytes: bytes.subarray(signature.contentStart, signature.contentEnd),
    },
    signedAttributes,
    messageDigest,
  };
}

/** A certificate read for the path: names, serial, the signer marker, key profile, validity. */
export function readCertificate(input: Buffer, hash?: string): ReadCertificate | string {
  const der = Buffer.from(input);
  let outline: BerNode;
  try {
    outline = outlineBer(der, CERTIFICATE_LIMITS);
  } catch (err) {
    if (err instanceof BerError) return `a certificate is not DER: ${err.message}`;
    throw err;
  }
  const tbs = outline.children[0];
  if (outline.end !== der.length || !isUniversal(tbs, 16)) return 'a certificate is not X.509';
  // TBSCertificate ::= SEQUENCE { [0] version OPTIONAL, serialNumber, signature, issuer,
  //   validity, subject, subjectPublicKeyInfo, [1], [2], [3] extensions OPTIONAL }
  const at = isContext(tbs.children[0], 0) ? 1 : 0;
  const [serial, , issuer, , subject] = tbs.children.slice(at);
  if (!isUniversal(serial, 2) || !isUniversal(issuer, 16) || !isUniversal(subject, 16))
    return 'a certificate is not X.509';
  const extensions = tbs.children.slice(at + 6).find((f) => isContext(f, 3))?.children[0];
  const receiptSigner =
    extensions?.children.some(
      (e) =>
        isUniversal(e.children[0], 6) &&
        der.subarray(e.children[0].start, e.children[0].end).toString('hex') ===
          OID_FRAUD_RECEIPT_SIGNER,
    ) ?? false;
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(der);
  } catch {
    return 'a certificate of the SignedData is not a readable X.509 certificate';
  }
  const notBefore = new Date(x509.validFrom);
  const notAfter = new Date(x509.validTo);
  if (Number.isNaN(notBefore.getTime()) || Number.isNaN(notAfter.getTime()))
    return 'a certificate has an unreadable validity period';
  const publicKey = x509.publicKey;
  return {
    hash: hash ?? createHash('sha256').update(der).digest('hex'),
    x509,
    issuer: der.subarray(issuer.start, issuer.end),
    subject: der.subarray(subject.start, subject.end),
    serial: der.subarray(serial.start, serial.end),
    receiptSigner,
    publicKey,
    keyProblem: keyProfileProblem(publicKey),
    notBefore,
    notAfter,
  };
}

/** An INTEGER of one to six octets (attribute types and versions are small numbers). */
export function isInteger(node: BerNode | undefined): node is BerNode {
  const length = node ? node.contentEnd - node.contentStart : 0;
  return isUniversal(node, 2) && !node.constructed && length >= 1 && length <= 6;
}

/** The octets of an OCTET STRING, primitive or in primitive pieces (BER); null when it is not one. */
export function octetString(node: BerNode | undefined, bytes: Buffer): Buffer | null {
  if (!isUniversal(node, 4)) return null;
  const pieces = node.constructed ? node.children : [node];
  if (pieces.some((p) => !isUniversal(p, 4) || p.constructed)) return null;
  return Buffer.concat(pieces.map((p) => bytes.subarray(p.contentStart, p.contentEnd)));
}

export function commonName(cert: ReadCertificate): string {
  return (/CN=([^\n]*)/.exec(cert.x509.subject)?.[1] ?? 'unnamed').slice(0, 80);
}

export function oidText(der: Uint8Array): string {
  const read = asn1js.fromBER(new Uint8Array(der), {
    parseEmbedded: false,
    maxDepth: 1,
    maxNodes: 1,
  });
  return read.result instanceof asn1js.ObjectIdentifier
    ? read.result.valueBlock.toString().slice(0, 64)
    : 'an unreadable OID';
}

export function readFacts(content: Buffer): ReceiptFacts | string {
  let set: BerNode;
  try {
    set = outlineBer(content, CONTENT_LIMITS);
  } catch (err) {
    if (err instanceof BerError) return `the signed content is not BER: ${err.message}`;
    throw err;
  }
  if (set.end !== content.length) return 'the signed content is not one BER value';
  if (!isUniversal(set, 17)) return 'the signed content is not a SET of attributes';
  const fields = new Map<number, Uint8Array>();
  for (const item of set.children) {
    const [type, version, value] = item.children;
    const valueBytes = octetString(value, content);
    if (
      !isUniversal(item, 16) ||
      item.children.length !== 3 ||
      !isInteger(type) ||
      !isInteger(version) ||
      valueBytes === null
    )
      return 'an attribute is not SEQUENCE { INTEGER, INTEGER, OCTET STRING }';
    const n = content.readIntBE(type.contentStart, type.contentEnd - type.contentStart);
    if (fields.has(n)) return `attribute ${n} appears twice`;
    fields.set(n, valueBytes);
  }
  const text = (n: number) => {
    const bytes = fields.get(n);
    return bytes === undefined ? null : new TextDecoder('utf-8', { fatal: false }).decode(bytes);
  };
  const time = (n: number): Date | null | string => {
    const s = text(n);
    if (s === null) return null;
    // Apple writes ISO 8601 with milliseconds ("2020-11-21T22:13:02.796Z")
    if (!/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z$/.test(s))
      return `attribute ${n} is not an ISO 8601 UTC time`;
    const d = new Date(s);
    return Number.isNaN(d.getTime()) ? `attribute ${n} is not a valid time` : d;
  };

  const type = text(FIELD.type);
  const appId = text(FIELD.appId);
  const attestedCertificate = fields.get(FIELD.attestedCertificate);
  const creationTime = time(FIELD.creationTime);
  const notBefore = time(FIELD.notBefore);
  const expirationTime = time(FIELD.expirationTime);
  if (type === null) return 'the receipt has no type (attribute 6)';
  if (appId === null) return 'the receipt has no App ID (attribute 2)';
  if (!attestedCertificate) return 'the receipt has no attested certificate (attribute 3)';
  if (creationTime === null) return 'the receipt has no creation time (attribute 12)';
  for (const t of [creationTime, notBefore, expirationTime]) if (typeof t === 'string') return t;
  let riskMetric: number | null = null;
  const risk = text(FIELD.riskMetric);
  if (risk !== null) {
    if (!/^\d{1,9}$/.test(risk)) return 'the risk metric (attribute 17) is not a decimal integer';
    riskMetric = Number(risk);
  }
  return {
    type,
    appId,
    attestedCertificate,
    clientHash: fields.get(FIELD.clientHash) ?? null,
    token: text(FIELD.token),
    environment: text(FIELD.environment),
    creationTime: creationTime as Date,
    notBefore: notBefore as Date | null,
    expirationTime: expirationTime as Date | null,
    riskMetric,
  };
}
