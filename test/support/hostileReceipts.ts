/**
 * Hostile App Attest receipts, built at test time: CMS SignedData whose certificates form a cycle
 * (two CAs that issue each other), fan out (many certificates named as the signer's issuer), or
 * whose elements are many, deep or large. Certificates come from @peculiar/x509, the CMS structure
 * from asn1js (the hostile shapes are ones no CMS library writes), signatures from node:crypto.
 */
import { KeyObject, sign, webcrypto, X509Certificate as NodeCertificate } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import * as asn1js from 'asn1js';

type CryptoKeyPair = webcrypto.CryptoKeyPair;
const subtle = webcrypto.subtle;

const OID_FRAUD_RECEIPT_SIGNER = '1.2.840.113635.100.12.15';

/** A certificate with its key pair. */
export interface HostileCertificate {
  der: Buffer;
  keys: CryptoKeyPair;
}

/** A P-256 key pair. */
export async function p256Keys(): Promise<CryptoKeyPair> {
  return subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, [
    'sign',
    'verify',
  ]) as Promise<CryptoKeyPair>;
}

/** A certificate of `subject` issued under the name `issuer`, signed by `signingKey`. */
export async function certificate(options: {
  subject: string;
  issuer: string | x509.Name;
  keys: CryptoKeyPair;
  signingKey: webcrypto.CryptoKey;
  ca: boolean;
  serial?: string;
  receiptSigner?: boolean;
}): Promise<HostileCertificate> {
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: options.serial ?? '0a',
    subject: options.subject,
    issuer: options.issuer as string,
    notBefore: new Date('2020-01-01T00:00:00Z'),
    notAfter: new Date('2040-01-01T00:00:00Z'),
    publicKey: options.keys.publicKey,
    signingKey: options.signingKey,
    signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
    extensions: [
      new x509.BasicConstraintsExtension(options.ca, undefined, true),
      ...(options.receiptSigner
        ? [new x509.Extension(OID_FRAUD_RECEIPT_SIGNER, false, new Uint8Array([0x05, 0x00]))]
        : []),
    ],
  });
  return { der: Buffer.from(cert.rawData), keys: options.keys };
}

/** The signed content of an ATTEST receipt for `appId` and `leaf`, created at `created`. */
export function receiptContent(appId: string, leaf: Uint8Array, created: Date): Buffer {
  const attribute = (type: number, value: Uint8Array) =>
    new asn1js.Sequence({
      value: [
        new asn1js.Integer({ value: type }),
        new asn1js.Integer({ value: 1 }),
        new asn1js.OctetString({ valueHex: value }),
      ],
    });
  const text = (s: string) => Buffer.from(s, 'utf8');
  return Buffer.from(
    new asn1js.Set({
      value: [
        attribute(2, text(appId)),
        attribute(3, leaf),
        attribute(6, text('ATTEST')),
        attribute(12, text(created.toISOString())),
      ],
    }).toBER(false),
  );
}

const element = (der: Uint8Array | ArrayBuffer) => asn1js.fromBER(new Uint8Array(der)).result;

/** The issuer Name and serial INTEGER of a certificate, as DER (what a SignerInfo names). */
function issuerAndSerial(der: Buffer): asn1js.Sequence {
  const tbs = (element(der) as asn1js.Sequence).valueBlock.value[0] as asn1js.Sequence;
  const fields = tbs.valueBlock.value;
  const at = fields[0]!.idBlock.tagClass === 3 ? 1 : 0;
  return new asn1js.Sequence({
    value: [element(fields[at + 2]!.toBER(false)), element(fields[at]!.toBER(false))],
  });
}

/**
 * A ContentInfo holding a SignedData over `content` with `certificates` (DER, or any elements),
 * signed (no signed attributes) by `signer`'s key and naming `signer` as its signer.
 */
export function signedReceipt(options: {
  content: Uint8Array;
  certificates: (Uint8Array | asn1js.AsnType)[];
  signer: HostileCertificate;
}): Buffer {
  const key = KeyObject.from(options.signer.keys.privateKey);
  const signature = sign('sha256', options.content, { key, dsaEncoding: 'der' });
  const algorithm = (oid: string) =>
    new asn1js.Sequence({ value: [new asn1js.ObjectIdentifier({ value: oid })] });
  const signedData = new asn1js.Sequence({
    value: [
      new asn1js.Integer({ value: 1 }),
      new asn1js.Set({ value: [algorithm('2.16.840.1.101.3.4.2.1')] }),
      new asn1js.Sequence({
        value: [
          new asn1js.ObjectIdentifier({ value: '1.2.840.113549.1.7.1' }),
          new asn1js.Constructed({
            idBlock: { tagClass: 3, tagNumber: 0 },
            value: [new asn1js.OctetString({ valueHex: options.content })],
          }),
        ],
      }),
      new asn1js.Constructed({
        idBlock: { tagClass: 3, tagNumber: 0 },
        value: options.certificates.map((c) => (c instanceof Uint8Array ? element(c) : c)),
      }),
      new asn1js.Set({
        value: [
          new asn1js.Sequence({
            value: [
              new asn1js.Integer({ value: 1 }),
              issuerAndSerial(options.signer.der),
              algorithm('2.16.840.1.101.3.4.2.1'),
              algorithm('1.2.840.10045.4.3.2'),
              new asn1js.OctetString({ valueHex: signature }),
            ],
          }),
        ],
      }),
    ],
  });
  return Buffer.from(
    new asn1js.Sequence({
      value: [
        new asn1js.ObjectIdentifier({ value: '1.2.840.113549.1.7.2' }),
        new asn1js.Constructed({ idBlock: { tagClass: 3, tagNumber: 0 }, value: [signedData] }),
      ],
    }).toBER(false),
  );
}

/** What the hostile receipts are checked against: an App ID, an attested certificate, an instant. */
export const HOSTILE_APP_ID = 'ABCDE12345.com.example.attest';
export const HOSTILE_NOW = new Date('2026-11-22T12:00:00Z');

/**
 * Two CA certificates that issue each other (A by B, B by A) and a receipt signer under A: what
 * made pkijs's path builder recurse for good. `rootName` names B after a trust root (so A looks
 * issued by it): the root is then found by name, and A's signature is checked once against it.
 * `content` is the signed content (by default an ATTEST receipt for `attested` at HOSTILE_NOW).
 */
export async function cycleReceipt(
  attested: Uint8Array,
  rootName?: x509.Name,
  content = receiptContent(HOSTILE_APP_ID, attested, HOSTILE_NOW),
): Promise<Buffer> {
  const [a, b, s] = await Promise.all([p256Keys(), p256Keys(), p256Keys()]);
  const nameB = rootName ?? 'CN=Cycle CA B';
  const caA = await certificate({
    subject: 'CN=Cycle CA A',
    issuer: nameB,
    keys: a,
    signingKey: b.privateKey,
    ca: true,
    serial: '0b',
  });
  const caB = await certificate({
    subject: typeof nameB === 'string' ? nameB : nameB.toString(),
    issuer: 'CN=Cycle CA A',
    keys: b,
    signingKey: a.privateKey,
    ca: true,
    serial: '0c',
  });
  const signer = await certificate({
    subject: 'CN=Cycle receipt signer',
    issuer: 'CN=Cycle CA A',
    keys: s,
    signingKey: a.privateKey,
    ca: false,
    receiptSigner: true,
  });
  return signedReceipt({
    content,
    certificates: [signer.der, caA.der, caB.der],
    signer,
  });
}

/** A receipt signer and `issuers` CA certificates all named as its issuer, each with its own key. */
export async function fanOutReceipt(attested: Uint8Array, issuers: number): Promise<Buffer> {
  const cas = await Promise.all(
    Array.from({ length: issuers }, async (_, i) => {
      const keys = await p256Keys();
      return certificate({
        subject: 'CN=Fan-out CA',
        issuer: 'CN=Apple Root CA - G3, OU=Apple Certification Authority, O=Apple Inc., C=US',
        keys,
        signingKey: keys.privateKey,
        ca: true,
        serial: (i + 1).toString(16).padStart(2, '0'),
      });
    }),
  );
  const signer = await certificate({
    subject: 'CN=Fan-out receipt signer',
    issuer: 'CN=Fan-out CA',
    keys: await p256Keys(),
    signingKey: cas[0]!.keys.privateKey,
    ca: false,
    receiptSigner: true,
  });
  return signedReceipt({
    content: receiptContent(HOSTILE_APP_ID, attested, HOSTILE_NOW),
    certificates: [signer.der, ...cas.map((c) => c.der)],
    signer,
  });
}

/** `count` empty SETs where the certificates go (the 20 KB receipt). */
export async function emptySetsReceipt(attested: Uint8Array, count: number): Promise<Buffer> {
  const keys = await p256Keys();
  const signer = await certificate({
    subject: 'CN=Empty sets signer',
    issuer: 'CN=Empty sets signer',
    keys,
    signingKey: keys.privateKey,
    ca: false,
    receiptSigner: true,
  });
  return signedReceipt({
    content: receiptContent(HOSTILE_APP_ID, attested, HOSTILE_NOW),
    certificates: Array.from({ length: count }, () => new asn1js.Set()),
    signer,
  });
}

/** `depth` SEQUENCEs, each inside the next, where the certificates go (about 2 bytes a level). */
export async function deepReceipt(attested: Uint8Array, depth: number): Promise<Buffer> {
  const keys = await p256Keys();
  const signer = await certificate({
    subject: 'CN=Deep signer',
    issuer: 'CN=Deep signer',
    keys,
    signingKey: keys.privateKey,
    ca: false,
    receiptSigner: true,
  });
  // indefinite lengths: 30 80 ... 00 00 per level, which no encoder writes this deep
  const nested = Buffer.concat([
    Buffer.alloc(depth * 2, Buffer.from([0x30, 0x80])),
    Buffer.alloc(depth * 2, 0),
  ]);
  // a same-sized OCTET STRING holds the place (04 82 LL LL, then zeros), then the nesting overwrites it
  const placeholder = new asn1js.OctetString({ valueHex: new Uint8Array(nested.length - 4) });
  const receipt = signedReceipt({
    content: receiptContent(HOSTILE_APP_ID, attested, HOSTILE_NOW),
    certificates: [signer.der, placeholder],
    signer,
  });
  const at = receipt.indexOf(Buffer.from(placeholder.toBER(false)));
  nested.copy(receipt, at);
  return receipt;
}

/** The Name of a certificate (to make a hostile CA look issued by a real root). */
export function nameOf(cert: NodeCertificate): x509.Name {
  return new x509.X509Certificate(cert.raw).subjectName;
}
