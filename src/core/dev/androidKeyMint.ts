/**
 * Simulated Android hardware key attestation: a KeyDescription encoded with asn1js, a leaf
 * certificate carrying it (@peculiar/x509 over WebCrypto) signed by a CA the caller holds (the
 * development CA for `attest dev mint android-key`, a private CA in tests), and assertions signed
 * with the attested key (node:crypto). Each deny switch breaks exactly one check.
 */
import {
  createHash,
  createPublicKey,
  generateKeyPairSync,
  sign,
  webcrypto,
  type KeyObject,
} from 'node:crypto';
import * as asn1js from 'asn1js';
import { KEY_DESCRIPTION_OID } from '../android/keyDescription.js';
import { peculiarX509 } from '../apple/peculiarX509.js';
import type { AndroidBootState, AndroidSecurityLevel } from '../types.js';

const subtle = webcrypto.subtle;

const LEVELS: Record<AndroidSecurityLevel, number> = {
  Software: 0,
  TrustedEnvironment: 1,
  StrongBox: 2,
};
const BOOT: Record<AndroidBootState, number> = {
  Verified: 0,
  SelfSigned: 1,
  Unverified: 2,
  Failed: 3,
};

/** What a simulated device states in its key description. */
export interface KeyDescriptionFields {
  attestationVersion?: number;
  attestationSecurityLevel?: AndroidSecurityLevel;
  keyMintVersion?: number;
  keyMintSecurityLevel?: AndroidSecurityLevel;
  challenge: Uint8Array;
  packages?: { name: string; version: number }[];
  signatureDigests?: Uint8Array[];
  /** null: no rootOfTrust in the hardware-enforced list */
  rootOfTrust?: {
    verifiedBootKey?: Uint8Array;
    deviceLocked: boolean;
    verifiedBootState: AndroidBootState;
  } | null;
  /** YYYYMM; null leaves it out */
  osPatchLevel?: number | null;
  /** put attestationApplicationId in the hardware-enforced list (KeyMint 4 does) */
  applicationIdInHardware?: boolean;
}

const explicit = (tag: number, value: asn1js.AsnType) =>
  new asn1js.Constructed({ idBlock: { tagClass: 3, tagNumber: tag }, value: [value] });
const int = (n: number | bigint) => asn1js.Integer.fromBigInt(BigInt(n));
const octets = (b: Uint8Array) => new asn1js.OctetString({ valueHex: Buffer.from(b) });

/** The DER of a KeyDescription with `fields` (AOSP schema, attestation version 300 by default). */
export function encodeKeyDescription(fields: KeyDescriptionFields): Uint8Array {
  const appId = new asn1js.Sequence({
    value: [
      new asn1js.Set({
        value: (fields.packages ?? []).map(
          (p) =>
            new asn1js.Sequence({
              value: [octets(Buffer.from(p.name, 'utf8')), int(p.version)],
            }),
        ),
      }),
      new asn1js.Set({ value: (fields.signatureDigests ?? []).map(octets) }),
    ],
  });
  const appIdField = explicit(709, octets(new Uint8Array(appId.toBER(false))));
  const software: asn1js.AsnType[] = [explicit(701, int(Date.now()))];
  const hardware: asn1js.AsnType[] = [
    explicit(1, new asn1js.Set({ value: [int(2)] })), // purpose SIGN
    explicit(2, int(3)), // algorithm EC
    explicit(3, int(256)),
    explicit(5, new asn1js.Set({ value: [int(4)] })), // digest SHA-2-256
    explicit(10, int(1)), // ecCurve P-256
    explicit(503, new asn1js.Null()),
    explicit(702, int(0)), // origin GENERATED
  ];
  if (fields.applicationIdInHardware) hardware.push(appIdField);
  else software.push(appIdField);
  const root = fields.rootOfTrust === undefined ? DEFAULT_ROOT : fields.rootOfTrust;
  if (root) {
    hardware.push(
      explicit(
        704,
        new asn1js.Sequence({
          value: [
            octets(root.verifiedBootKey ?? new Uint8Array(32).fill(0xb0)),
            new asn1js.Boolean({ value: root.deviceLocked }),
            new asn1js.Enumerated({ value: BOOT[root.verifiedBootState] }),
            octets(new Uint8Array(32).fill(0xb1)),
          ],
        }),
      ),
    );
  }
  hardware.push(explicit(705, int(150000)));
  const patch = fields.osPatchLevel === undefined ? 202611 : fields.osPatchLevel;
  if (patch !== null) hardware.push(explicit(706, int(patch)));
  hardware.sort((a, b) => a.idBlock.tagNumber - b.idBlock.tagNumber);
  software.sort((a, b) => a.idBlock.tagNumber - b.idBlock.tagNumber);
  const description = new asn1js.Sequence({
    value: [
      int(fields.attestationVersion ?? 300),
      new asn1js.Enumerated({
        value: LEVELS[fields.attestationSecurityLevel ?? 'TrustedEnvironment'],
      }),
      int(fields.keyMintVersion ?? 300),
      new asn1js.Enumerated({ value: LEVELS[fields.keyMintSecurityLevel ?? 'TrustedEnvironment'] }),
      octets(fields.challenge),
      octets(new Uint8Array()),
      new asn1js.Sequence({ value: software }),
      new asn1js.Sequence({ value: hardware }),
    ],
  });
  return new Uint8Array(description.toBER(false));
}

const DEFAULT_ROOT: NonNullable<KeyDescriptionFields['rootOfTrust']> = {
  deviceLocked: true,
  verifiedBootState: 'Verified',
};

/** The CA that signs simulated leaves: its certificate and its PKCS#8 key. */
export interface AndroidIssuer {
  cert: Uint8Array;
  key: Uint8Array;
  /** the WebCrypto algorithm of `key` (default ECDSA P-384) */
  algorithm?: webcrypto.EcKeyImportParams | webcrypto.RsaHashedImportParams;
}

/** A simulated attested key pair. */
export interface AndroidDeviceKey {
  privateKey: KeyObject;
  /** DER SubjectPublicKeyInfo */
  spki: Uint8Array;
  /** SHA-256 of `spki`: the token's keyId */
  keyId: Uint8Array;
}

/** A new attested key: EC P-256 (default) or RSA of `rsaBits`. */
export function createAndroidDeviceKey(options: { rsaBits?: number } = {}): AndroidDeviceKey {
  const { privateKey } = options.rsaBits
    ? generateKeyPairSync('rsa', { modulusLength: options.rsaBits })
    : generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return androidDeviceKeyOf(privateKey);
}

/** The attested key of a private key (PKCS#8 PEM as a device file keeps it, or a KeyObject). */
export function androidDeviceKeyOf(privateKey: KeyObject): AndroidDeviceKey {
  const spki = new Uint8Array(createPublicKey(privateKey).export({ type: 'spki', format: 'der' }));
  return {
    privateKey,
    spki,
    keyId: new Uint8Array(createHash('sha256').update(spki).digest()),
  };
}

export interface LeafOptions {
  now: Date;
  /** the leaf's serial, hex (a revoked one for the deny path) */
  serialHex?: string;
  /** the key descriptions' DER (one normally; none or two for the deny paths) */
  keyDescriptions?: readonly Uint8Array[];
  /** another issuer name than the issuer certificate's subject (breaks name chaining) */
  issuerName?: string;
}

/**
 * A leaf certificate for `device` carrying `keyDescriptions`, signed by `issuer`. Its validity is
 * 1970 to 2048, as KeyMint stamps it.
 */
export async function mintAttestationLeaf(
  issuer: AndroidIssuer,
  device: AndroidDeviceKey,
  options: LeafOptions,
): Promise<Uint8Array> {
  const x509 = peculiarX509();
  const issuerCert = new x509.X509Certificate(issuer.cert);
  const algorithm = issuer.algorithm ?? { name: 'ECDSA', namedCurve: 'P-384' };
  const signingKey = await subtle.importKey('pkcs8', issuer.key, algorithm, false, ['sign']);
  const isEc = createPublicKey(device.privateKey).asymmetricKeyType === 'ec';
  const publicKey = await subtle.importKey(
    'spki',
    device.spki,
    isEc ? { name: 'ECDSA', namedCurve: 'P-256' } : { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' },
    true,
    ['verify'],
  );
  const leaf = await x509.X509CertificateGenerator.create({
    serialNumber: options.serialHex ?? '01',
    subject: 'CN=Android Keystore Key',
    issuer: options.issuerName ?? issuerCert.subject,
    notBefore: new Date(0),
    notAfter: new Date('2048-01-01T00:00:00Z'),
    publicKey,
    signingKey,
    signingAlgorithm:
      algorithm.name === 'ECDSA'
        ? { name: 'ECDSA', hash: 'SHA-256' }
        : { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' },
    extensions: (options.keyDescriptions ?? []).map(
      (d) => new x509.Extension(KEY_DESCRIPTION_OID, false, d),
    ),
  });
  return new Uint8Array(leaf.rawData);
}

/** An assertion: the attested key's signature over the final nonce (DER ECDSA or PKCS#1 v1.5). */
export function signAndroidAssertion(device: AndroidDeviceKey, nonce: Uint8Array): Uint8Array {
  return new Uint8Array(sign('sha256', nonce, device.privateKey));
}

/** SHA-256 of the final nonce: the attestation challenge a device sets. */
export function androidChallenge(nonce: Uint8Array): Uint8Array {
  return new Uint8Array(createHash('sha256').update(nonce).digest());
}
