/**
 * App Attest receipts made with the development CA (test API keys only): what the Firebase debug
 * provider gives an app without a device. A receipt is shaped as Apple's: a CMS SignedData whose
 * content is a SET of (type, version, value) attributes, signed by a certificate carrying Apple's
 * receipt-signer marker and issued by the development intermediate, so it follows the receipt
 * verifier's one fixed path (signer -> intermediate -> root) to the development root. The CMS
 * structure comes from @peculiar/asn1-cms, the attribute values from asn1js, the signer certificate
 * from @peculiar/x509 and the signature from node:crypto.
 */
import { createPrivateKey, sign, webcrypto } from 'node:crypto';
import * as asn1js from 'asn1js';
import type { AppleEnvironment } from '../apple/appleTokenDetails.js';
import { peculiarX509 } from '../apple/peculiarX509.js';
import type { DevCa } from './devCa.js';

const subtle = webcrypto.subtle;
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const P384 = { name: 'ECDSA', namedCurve: 'P-384' } as const;
const P256 = { name: 'ECDSA', namedCurve: 'P-256' } as const;
/** Apple's marker on the receipt signing certificate (the verifier requires it) */
const FRAUD_RECEIPT_SIGNER_OID = '1.2.840.113635.100.12.15';
const SHA256_OID = '2.16.840.1.101.3.4.2.1';
const ECDSA_WITH_SHA256_OID = '1.2.840.10045.4.3.2';
/** Apple's refreshed receipts may be refreshed again after a day and are valid for 90 */
const REFRESH_AFTER_MS = DAY;
const VALID_FOR_MS = 90 * DAY;

/** What a minted receipt says (the attribute numbers are Apple's, docs/token-format.md section 5). */
export interface ReceiptRequest {
  /** `ATTEST` (an attestation's receipt) or `RECEIPT` (a refreshed one) */
  type: 'ATTEST' | 'RECEIPT';
  appId: string;
  /** DER of the attested key's certificate, `x5c[0]` of its attestation */
  attestedCertificate: Uint8Array;
  environment: AppleEnvironment;
  now: Date;
  /** attribute 17 (refreshed receipts) */
  riskMetric?: number;
}

/**
 * A receipt signed through the development CA: attributes 2, 3, 6, 7, 12 and 21 (and 17, 19 for a
 * refreshed one), signer certificate and intermediate in the SignedData.
 * @param ca the development CA (its intermediate signs the receipt signer)
 * @param request what the receipt says
 */
export async function mintReceipt(ca: DevCa, request: ReceiptRequest): Promise<Uint8Array> {
  const [{ AsnConvert, OctetString }, cms, { Certificate, AlgorithmIdentifier }] =
    await Promise.all([
      import('@peculiar/asn1-schema'),
      import('@peculiar/asn1-cms'),
      import('@peculiar/asn1-x509'),
    ]);
  const t = request.now.getTime();
  const iso = (ms: number) => new Date(ms).toISOString();
  const attributes: [number, Uint8Array | string][] = [
    [2, request.appId],
    [3, request.attestedCertificate],
    [6, request.type],
    [7, request.environment === 'Development' ? 'sandbox' : 'production'],
    [12, iso(t)],
    [21, iso(t + VALID_FOR_MS)],
  ];
  if (request.type === 'RECEIPT') attributes.push([19, iso(t + REFRESH_AFTER_MS)]);
  if (request.riskMetric !== undefined) attributes.push([17, String(request.riskMetric)]);
  const content = new asn1js.Set({
    value: attributes.map(
      ([type, value]) =>
        new asn1js.Sequence({
          value: [
            new asn1js.Integer({ value: type }),
            new asn1js.Integer({ value: 1 }),
            new asn1js.OctetString({
              valueHex: typeof value === 'string' ? Buffer.from(value, 'utf8') : value,
            }),
          ],
        }),
    ),
  }).toBER(false);

  const signer = await receiptSigner(ca, request.now);
  const signerCert = AsnConvert.parse(signer.certificate, Certificate);
  const intermediateCert = AsnConvert.parse(ca.intermediateCert, Certificate);
  // no signed attributes: the signature covers the content itself (RFC 5652 5.4)
  const signature = sign('sha256', Buffer.from(content), { key: signer.key, dsaEncoding: 'der' });
  const signedData = new cms.SignedData({
    version: cms.CMSVersion.v1,
    digestAlgorithms: new cms.DigestAlgorithmIdentifiers([
      new AlgorithmIdentifier({ algorithm: SHA256_OID }),
    ]),
    encapContentInfo: new cms.EncapsulatedContentInfo({
      eContentType: cms.id_data,
      eContent: new cms.EncapsulatedContent({ single: new OctetString(content) }),
    }),
    certificates: new cms.CertificateSet([
      new cms.CertificateChoices({ certificate: signerCert }),
      new cms.CertificateChoices({ certificate: intermediateCert }),
    ]),
    signerInfos: new cms.SignerInfos([
      new cms.SignerInfo({
        version: cms.CMSVersion.v1,
        sid: new cms.SignerIdentifier({
          issuerAndSerialNumber: new cms.IssuerAndSerialNumber({
            issuer: signerCert.tbsCertificate.issuer,
            serialNumber: signerCert.tbsCertificate.serialNumber,
          }),
        }),
        digestAlgorithm: new AlgorithmIdentifier({ algorithm: SHA256_OID }),
        signatureAlgorithm: new AlgorithmIdentifier({ algorithm: ECDSA_WITH_SHA256_OID }),
        signature: new OctetString(signature),
      }),
    ]),
  });
  return new Uint8Array(
    AsnConvert.serialize(
      new cms.ContentInfo({
        contentType: cms.id_signedData,
        content: AsnConvert.serialize(signedData),
      }),
    ),
  );
}

/** A fresh P-256 receipt signing certificate under the development intermediate, valid 30 days. */
async function receiptSigner(ca: DevCa, now: Date) {
  const x509 = peculiarX509();
  const intermediate = new x509.X509Certificate(ca.intermediateCert);
  const signingKey = await subtle.importKey('pkcs8', ca.intermediateKey, P384, false, ['sign']);
  const keys = (await subtle.generateKey(P256, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair;
  const serial = Buffer.from(webcrypto.getRandomValues(new Uint8Array(8)))
    .toString('hex')
    .replace(/^[89a-f]/, '1');
  const certificate = await x509.X509CertificateGenerator.create({
    serialNumber: serial,
    subject:
      'CN=attest Development Application Attestation Fraud Receipt Signing, O=attest (test keys only)',
    issuer: intermediate.subject,
    notBefore: new Date(now.getTime() - HOUR),
    notAfter: new Date(now.getTime() + 30 * DAY),
    publicKey: keys.publicKey,
    signingKey,
    signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      // Apple's marker carries a NULL
      new x509.Extension(FRAUD_RECEIPT_SIGNER_OID, false, new Uint8Array([0x05, 0x00])),
    ],
  });
  const pkcs8 = Buffer.from(await subtle.exportKey('pkcs8', keys.privateKey));
  return {
    certificate: new Uint8Array(certificate.rawData),
    key: createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' }),
  };
}
