/**
 * App Attest receipts (Apple's "Assessing fraud risk"): a CMS SignedData (RFC 5652, BER with
 * indefinite lengths as Apple sends it) signed by "Application Attestation Fraud Receipt Signing",
 * which chains to Apple Root CA - G3, whose content is a SET of (type, version, value) attributes.
 *
 * The CMS work (signature, signed attributes, signer chain at the verification instant) is
 * pkijs's; this module only reads the attributes and holds them against what the key store knows.
 * It never throws on hostile bytes: every problem is a `{ valid: false, problem }` value.
 */
import { createHash, webcrypto, X509Certificate } from 'node:crypto';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';
import { LruCache } from '../lruCache.js';
import { APPLE_ROOT_CA_G3_PEM } from './appleRootCaG3.js';
import { parseTrustRoots } from './trustRoots.js';

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

/** The outcome of a receipt check: `problem` names the first thing that failed. */
export type ReceiptVerdict =
  | { valid: true; facts: ReceiptFacts }
  | { valid: false; problem: string; facts: ReceiptFacts | null };

/** What the receipt must say. */
export interface ReceiptExpectation {
  /** absent = either type (a receipt file checked alone) */
  type?: ReceiptType;
  /** the attestation's (or the stored key's) App ID; absent = not compared */
  appId?: string;
  /** the attestation's `x5c[0]`, byte for byte; absent = not compared */
  attestedCertificate?: Uint8Array;
}

/** Verifies receipts against fixed trust roots. */
export interface ReceiptVerifier {
  readonly roots: readonly X509Certificate[];
  /**
   * Checks `receipt` at `now`: CMS signature, signer chain (valid at `now`), attributes.
   * @param receipt the receipt bytes (DER or BER)
   * @param expect the type, App ID and attested certificate it must carry
   * @param now the verification instant
   */
  verify(receipt: Uint8Array, expect: ReceiptExpectation, now: Date): Promise<ReceiptVerdict>;
}

const OID_SIGNED_DATA = '1.2.840.113549.1.7.2';
const OID_DATA = '1.2.840.113549.1.7.1';
/** Apple's marker extension on the receipt signing certificate */
const OID_FRAUD_RECEIPT_SIGNER = '1.2.840.113635.100.12.15';
// Apple's receipts are about 4 KiB; the bound keeps hostile nesting from reaching the parser's limits
const MAX_RECEIPT_BYTES = 32 * 1024;

const FIELD = {
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

let g3Roots: readonly X509Certificate[] | undefined;

/** The built-in Apple Root CA - G3, parsed once. */
export function defaultReceiptRoots(): readonly X509Certificate[] {
  g3Roots ??= Object.freeze(parseTrustRoots(APPLE_ROOT_CA_G3_PEM));
  return g3Roots;
}

/**
 * Builds a receipt verifier over `roots` (Apple Root CA - G3 by default; tests replace it).
 * @param roots trust anchors for the receipt signer's chain
 */
export function createReceiptVerifier(
  roots: readonly X509Certificate[] = defaultReceiptRoots(),
): ReceiptVerifier {
  if (roots.length === 0) throw new Error('receipts need at least one trust root');
  const engine = new RememberingCryptoEngine({
    name: 'node',
    crypto: webcrypto as unknown as pkijs.ICryptoEngine['crypto'],
  });
  const trusted = roots.map((root) => pkijs.Certificate.fromBER(root.raw));

  return {
    roots,
    async verify(receipt, expect, now) {
      let facts: ReceiptFacts | null = null;
      try {
        const signed = readSignedData(receipt);
        if (typeof signed === 'string') return { valid: false, problem: signed, facts };
        const content = readContent(signed);
        if (typeof content === 'string') return { valid: false, problem: content, facts };
        const read = readFacts(content);
        if (typeof read === 'string') return { valid: false, problem: read, facts };
        facts = read;

        let result: pkijs.SignedDataVerifyResult;
        try {
          result = await signed.verify(
            {
              signer: 0,
              trustedCerts: trusted,
              checkDate: now,
              checkChain: true,
              extendedMode: true,
            },
            engine,
          );
        } catch (err) {
          return { valid: false, problem: cmsProblem(err), facts };
        }
        if (result.signatureVerified !== true)
          return { valid: false, problem: 'the CMS signature does not verify (RFC 5652)', facts };
        const signer = result.signerCertificate;
        if (!signer?.extensions?.some((e) => e.extnID === OID_FRAUD_RECEIPT_SIGNER))
          return {
            valid: false,
            problem: 'the signer is not an App Attest receipt signing certificate',
            facts,
          };

        const problem = attributeProblem(facts, expect, now);
        return problem ? { valid: false, problem, facts } : { valid: true, facts };
      } catch (err) {
        // pkijs and asn1js reach their own limits on adversarial input (RangeError, TypeError)
        return { valid: false, problem: `unreadable receipt (${describe(err)})`, facts };
      }
    },
  };
}

/**
 * The attributes of a receipt without checking its signature or chain: for a receipt this service
 * checked before it stored it (the refresher needs its attested certificate). Null when unreadable.
 * @param receipt the receipt bytes
 */
export function readReceiptFacts(receipt: Uint8Array): ReceiptFacts | null {
  try {
    const signed = readSignedData(receipt);
    if (typeof signed === 'string') return null;
    const content = readContent(signed);
    if (typeof content === 'string') return null;
    const facts = readFacts(content);
    return typeof facts === 'string' ? null : facts;
  } catch {
    return null;
  }
}

function readSignedData(bytes: Uint8Array): pkijs.SignedData | string {
  if (bytes.length === 0) return 'the receipt is empty';
  if (bytes.length > MAX_RECEIPT_BYTES)
    return `the receipt is ${bytes.length} bytes, more than ${MAX_RECEIPT_BYTES}`;
  const view = new Uint8Array(bytes); // own, aligned copy for asn1js
  // OCTET and BIT STRING contents are not tried as ASN.1 (asn1js's default): pkijs reads them
  // from their bytes when it needs them (the content below, keys, signatures, extensions)
  const asn1 = asn1js.fromBER(view, { parseEmbedded: false });
  if (asn1.offset === -1) return `not BER: ${asn1.result.error || 'unreadable'}`;
  if (asn1.offset !== view.length)
    return `${view.length - asn1.offset} bytes follow the CMS ContentInfo`;
  const info = new pkijs.ContentInfo({ schema: asn1.result });
  if (info.contentType !== OID_SIGNED_DATA)
    return `the ContentInfo holds ${info.contentType}, not SignedData`;
  const certificates = takeCertificates(info.content);
  const signed = new pkijs.SignedData({ schema: info.content });
  if (certificates) signed.certificates = certificates;
  if (signed.signerInfos.length !== 1)
    return `the SignedData has ${signed.signerInfos.length} signers, not one`;
  if (!signed.certificates?.length) return 'the SignedData carries no certificates';
  return signed;
}

// Every receipt carries the same few Apple certificates: pkijs's reading of them (a third of a
// receipt's CPU) is kept by their bytes, and so are the extensions pkijs reads from them later.
const certificateSets = new LruCache<string, pkijs.CertificateSet>(16);

/**
 * The certificates of a SignedData, read by pkijs as `SignedData` reads them, or from the reading
 * of the same bytes kept earlier; their element is taken out of `content` so that pkijs does not
 * read them again. `null` (and `content` untouched) when there is no `[0]` where RFC 5652 puts
 * `certificates` or pkijs cannot read it: `SignedData` then reads, or refuses, the whole as before.
 * @param content the SignedData SEQUENCE, as asn1js decoded it
 */
function takeCertificates(content: unknown): pkijs.SignedData['certificates'] | null {
  if (!(content instanceof asn1js.Sequence)) return null;
  const fields = content.valueBlock.value;
  // SignedData ::= SEQUENCE { version, digestAlgorithms, encapContentInfo, [0] certificates OPTIONAL, ... }
  const element = fields[3];
  if (
    !(element instanceof asn1js.Constructed) ||
    element.idBlock.tagClass !== 3 ||
    element.idBlock.tagNumber !== 0
  )
    return null;
  const key = createHash('sha256').update(element.valueBeforeDecodeView).digest('hex');
  let set = certificateSets.get(key);
  if (!set) {
    try {
      // what SignedData.fromSchema does with the element it matched
      set = new pkijs.CertificateSet({
        schema: new asn1js.Set({ value: element.valueBlock.value }),
      });
    } catch {
      return null;
    }
    certificateSets.set(key, set);
  }
  fields.splice(3, 1);
  return set.certificates.slice();
}

function readContent(signed: pkijs.SignedData): Uint8Array | string {
  const encap = signed.encapContentInfo;
  if (encap.eContentType !== OID_DATA)
    return `the signed content type is ${encap.eContentType}, not data`;
  const e = encap.eContent;
  if (!(e instanceof asn1js.OctetString)) return 'the signed content is missing';
  return new Uint8Array(e.getValue());
}

function readFacts(content: Uint8Array): ReceiptFacts | string {
  const asn1 = asn1js.fromBER(content, { parseEmbedded: false });
  if (asn1.offset === -1 || asn1.offset !== content.length)
    return 'the signed content is not one BER value';
  const set = asn1.result;
  if (!(set instanceof asn1js.Set)) return 'the signed content is not a SET of attributes';
  const fields = new Map<number, Uint8Array>();
  for (const item of set.valueBlock.value) {
    const parts = item instanceof asn1js.Sequence ? item.valueBlock.value : [];
    const [type, version, value] = parts;
    if (
      parts.length !== 3 ||
      !(type instanceof asn1js.Integer) ||
      !(version instanceof asn1js.Integer) ||
      !(value instanceof asn1js.OctetString)
    )
      return 'an attribute is not SEQUENCE { INTEGER, INTEGER, OCTET STRING }';
    const n = type.valueBlock.valueDec;
    if (fields.has(n)) return `attribute ${n} appears twice`;
    fields.set(n, new Uint8Array(value.getValue()));
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

function attributeProblem(facts: ReceiptFacts, expect: ReceiptExpectation, now: Date) {
  if (
    expect.type === undefined
      ? !['ATTEST', 'RECEIPT'].includes(facts.type)
      : facts.type !== expect.type
  )
    return `the receipt type is ${JSON.stringify(facts.type.slice(0, 16))}, not ${expect.type ?? 'ATTEST or RECEIPT'}`;
  if (expect.appId !== undefined && facts.appId !== expect.appId)
    return `the receipt is for App ID ${JSON.stringify(facts.appId.slice(0, 128))}, not "${expect.appId}"`;
  if (
    expect.attestedCertificate !== undefined &&
    !Buffer.from(facts.attestedCertificate).equals(Buffer.from(expect.attestedCertificate))
  )
    return "the receipt's attested certificate is not the attestation's x5c[0]";
  if (facts.creationTime.getTime() > now.getTime())
    return `the receipt was created at ${facts.creationTime.toISOString()}, after the verification time ${now.toISOString()}`;
  if (facts.expirationTime && facts.expirationTime.getTime() < now.getTime())
    return `the receipt expired at ${facts.expirationTime.toISOString()}`;
  return null;
}

type ImportedKey = ReturnType<pkijs.CryptoEngine['getPublicKey']>;
type SignedBytes = Parameters<pkijs.CryptoEngine['verifyWithPublicKey']>[0];

/**
 * pkijs's WebCrypto engine, remembering what repeats from receipt to receipt: the public keys it
 * imported and the signatures that verified. Every receipt carries the same few Apple certificates,
 * whose signatures (one by Apple Root CA - G3, a P-384 check) pkijs's chain validation would
 * otherwise import keys for and check again each time. Only a signature that verified is
 * remembered, by the SHA-256 of everything its check read (signed bytes, signature, key,
 * algorithm), so a check of the very same inputs is answered from memory; pkijs still runs every
 * other step (names, validity at the instant, the message digest) on every call.
 */
class RememberingCryptoEngine extends pkijs.CryptoEngine {
  private readonly verified = new LruCache<string, true>(64);
  private readonly keys = new LruCache<string, ImportedKey>(64);

  override getPublicKey(
    publicKeyInfo: pkijs.PublicKeyInfo,
    signatureAlgorithm: pkijs.AlgorithmIdentifier,
    parameters?: pkijs.CryptoEnginePublicKeyParams,
  ): ImportedKey {
    const params = parameters ?? this.fillPublicKeyParameters(publicKeyInfo, signatureAlgorithm);
    const id = createHash('sha256')
      .update(new Uint8Array(publicKeyInfo.toSchema().toBER(false)))
      .update(JSON.stringify(params))
      .digest('hex');
    let key = this.keys.get(id);
    if (!key) {
      key = super.getPublicKey(publicKeyInfo, signatureAlgorithm, params);
      key.catch(() => this.keys.delete(id));
      this.keys.set(id, key);
    }
    return key;
  }

  override async verifyWithPublicKey(
    data: SignedBytes,
    signature: asn1js.BitString | asn1js.OctetString,
    publicKeyInfo: pkijs.PublicKeyInfo,
    signatureAlgorithm: pkijs.AlgorithmIdentifier,
    shaAlgorithm?: string,
  ): Promise<boolean> {
    const hash = createHash('sha256');
    for (const part of [
      ArrayBuffer.isView(data)
        ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
        : new Uint8Array(data),
      signature.valueBlock.valueHexView,
      new Uint8Array(publicKeyInfo.toSchema().toBER(false)),
      new Uint8Array(signatureAlgorithm.toSchema().toBER(false)),
      Buffer.from(shaAlgorithm ?? ''),
    ]) {
      // each part's length first, so no two different inputs hash alike
      hash.update(`${part.byteLength}:`).update(part);
    }
    const id = hash.digest('hex');
    if (this.verified.get(id)) return true;
    const ok = await super.verifyWithPublicKey(
      data,
      signature,
      publicKeyInfo,
      signatureAlgorithm,
      shaAlgorithm,
    );
    if (ok) this.verified.set(id, true);
    return ok;
  }
}

function cmsProblem(err: unknown): string {
  if (err instanceof pkijs.SignedDataVerifyError) {
    if (err.code === 5) return `the signer chain does not verify: ${err.message}`;
    if (err.code === 15) return `the CMS signature does not verify (RFC 5652): ${err.message}`;
    return `CMS: ${err.message}`;
  }
  return `CMS: ${describe(err)}`;
}

function describe(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).slice(0, 200);
}
