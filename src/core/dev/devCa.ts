import * as asn1js from 'asn1js';
/**
 * The development App Attest CA: a P-384 root and intermediate shaped like Apple's, made once per
 * deployment (`attest dev init`), and the attestations and assertions a simulated device makes
 * under it. Test API keys trust its root; live keys never do. Certificates come from
 * @peculiar/x509 over WebCrypto, signatures from node:crypto, objects from cbor-x.
 */
import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  sign,
  webcrypto,
  type KeyObject,
} from 'node:crypto';
import type { AppleEnvironment, ApplePlatform } from '../apple/appleTokenDetails.js';
import {
  APPLE_KEY_ACCESS_CONTROL_OID,
  APPLE_OS_INFO_OID,
  APPLE_NONCE_EXTENSION_OID,
  appAttestNonce,
  nonceExtensionValue,
} from '../apple/nonceExtension.js';
import {
  BUNDLE_VERSION_KEY,
  VALIDATION_CATEGORIES,
  VALIDATION_CATEGORY_KEY,
} from '../apple/appleDistribution.js';
import { peculiarX509 } from '../apple/peculiarX509.js';
import { mintReceipt } from './devReceipt.js';
import { encodeCbor } from '../envelope.js';

const subtle = webcrypto.subtle;
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const P384 = { name: 'ECDSA', namedCurve: 'P-384' } as const;
const P256 = { name: 'ECDSA', namedCurve: 'P-256' } as const;

/** The serialNumber attribute of the development intermediate's subject. */
export const DEV_INTERMEDIATE_SERIAL_NAME = 'de7ca001';

/** The CA as it is stored: DER certificates and the intermediate's PKCS#8 key (the root's is dropped). */
export interface DevCa {
  rootCert: Uint8Array;
  intermediateCert: Uint8Array;
  intermediateKey: Uint8Array;
}

/**
 * Makes a new development CA valid from `now` (an hour back, for clock skew) for 20 years (root)
 * and 10 years (intermediate).
 * @param now the clock
 */
export async function createDevCa(now: Date): Promise<DevCa> {
  const x509 = peculiarX509();
  const notBefore = new Date(now.getTime() - HOUR);
  const serial = () =>
    Buffer.from(webcrypto.getRandomValues(new Uint8Array(8)))
      .toString('hex')
      .replace(/^[89a-f]/, '1');
  const rootKeys = (await subtle.generateKey(P384, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair;
  const root = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: 'CN=attest Development App Attestation Root CA, O=attest (test keys only)',
    notBefore,
    notAfter: new Date(now.getTime() + 20 * 365 * DAY),
    keys: rootKeys,
    signingAlgorithm: { name: 'ECDSA', hash: 'SHA-384' },
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(
        x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign,
        true,
      ),
      await x509.SubjectKeyIdentifierExtension.create(rootKeys.publicKey),
    ],
  });
  const intermediateKeys = (await subtle.generateKey(P384, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair;
  const intermediate = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    // the serialNumber attribute makes android-key chains under it factory-provisioned by Google's
    // rules, so the StrongBox subject cross-check can be tried (dev CAs made before lack it)
    subject: `CN=attest Development App Attestation CA 1, O=attest (test keys only), 2.5.4.5=${DEV_INTERMEDIATE_SERIAL_NAME}`,
    issuer: root.subject,
    notBefore,
    notAfter: new Date(now.getTime() + 10 * 365 * DAY),
    publicKey: intermediateKeys.publicKey,
    signingKey: rootKeys.privateKey,
    signingAlgorithm: { name: 'ECDSA', hash: 'SHA-384' },
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(
        x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign,
        true,
      ),
      await x509.SubjectKeyIdentifierExtension.create(intermediateKeys.publicKey),
      await x509.AuthorityKeyIdentifierExtension.create(rootKeys.publicKey),
    ],
  });
  return {
    rootCert: new Uint8Array(root.rawData),
    intermediateCert: new Uint8Array(intermediate.rawData),
    intermediateKey: new Uint8Array(await subtle.exportKey('pkcs8', intermediateKeys.privateKey)),
  };
}

/** A simulated App Attest key: a P-256 key pair and its key id. */
export interface SimulatedKey {
  /** SHA-256 of the uncompressed public point */
  keyId: Uint8Array;
  privateKey: KeyObject;
}

/** A new simulated Secure Enclave key. */
export function createSimulatedKey(): SimulatedKey {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return { keyId: keyIdOf(privateKey), privateKey };
}

/** A simulated key from its PKCS#8 PEM (as a device file keeps it). */
export function loadSimulatedKey(pem: string): SimulatedKey {
  const privateKey = createPrivateKey(pem);
  if (
    privateKey.asymmetricKeyType !== 'ec' ||
    privateKey.asymmetricKeyDetails?.namedCurve !== 'prime256v1'
  ) {
    throw new Error('the device key is not an EC P-256 private key');
  }
  return { keyId: keyIdOf(privateKey), privateKey };
}

function uncompressedPoint(key: KeyObject): Buffer {
  const jwk = createPublicKey(key).export({ format: 'jwk' });
  return Buffer.concat([
    Buffer.from([0x04]),
    Buffer.from(jwk.x!, 'base64url'),
    Buffer.from(jwk.y!, 'base64url'),
  ]);
}

function keyIdOf(key: KeyObject): Uint8Array {
  return new Uint8Array(createHash('sha256').update(uncompressedPoint(key)).digest());
}

/** The aaguid App Attest writes per environment (docs/token-format.md section 5, check 7). */
export const AAGUID: Readonly<Record<AppleEnvironment, Uint8Array>> = {
  Development: new Uint8Array(Buffer.from('appattestdevelop', 'ascii')),
  Production: new Uint8Array(Buffer.concat([Buffer.from('appattest', 'ascii'), Buffer.alloc(7)])),
};

const sha256 = (...parts: Uint8Array[]) => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest();
};

function authDataHeader(appId: string, flags: number, counter: number): Buffer {
  const fixed = Buffer.alloc(5);
  fixed.writeUInt8(flags, 0);
  fixed.writeUInt32BE(counter, 1);
  return Buffer.concat([sha256(Buffer.from(appId, 'utf8')), fixed]);
}

export interface AttestationRequest {
  appId: string;
  environment: AppleEnvironment;
  /** SHA-256 of the final nonce, as the device passes it to `attestKey` */
  clientDataHash: Uint8Array;
  now: Date;
  /** deny-path switches: bind another nonce; a leaf that expired days ago */
  wrongNonce?: boolean;
  expired?: boolean;
  /** attach an `ATTEST` receipt signed through the development CA */
  receipt?: boolean;
  /** the iOS 27 authData extensions (apple_validation_category_01, apple_bundle_version_01) */
  distribution?: DistributionExtensions;
  /** a Mac key (macOS 27): the leaf carries a key access-control extension */
  platform?: ApplePlatform;
  /** the key access-control extension's values, replacing the Mac one (malformed for deny paths) */
  accessControl?: readonly Uint8Array[];
}

/**
 * A key access-control blob as a Mac key's leaf carries it (1.2.840.113635.100.8.6), shaped like
 * the one in Apple's 2026 validation guide sample: the service reads only its presence and size.
 */
export const DEV_KEY_ACCESS_CONTROL = Buffer.from(
  '3049a347044530430c023131303d300a0c036f6b64a1030101ff30090c026f61a1030101ff300b0c046f73676ea1030101ff300b0c046f64656ca1030101ff300a0c036f636ba1030101ff',
  'hex',
);

/**
 * Apple's OS information extension (1.2.840.113635.100.8.7) holding only the OS name field
 * (context tag 1026, an OCTET STRING): `macosx` names a Mac key, `iphoneos` an iPhone or iPad one.
 */
export function devOsInformation(osName: string): Buffer {
  const field = new asn1js.Constructed({
    idBlock: { tagClass: 3, tagNumber: 1026 },
    value: [new asn1js.OctetString({ valueHex: new Uint8Array(Buffer.from(osName, 'latin1')) })],
  });
  return Buffer.from(new asn1js.Sequence({ value: [field] }).toBER());
}

/** What a simulated iOS 27 device says about its app's distribution. */
export interface DistributionExtensions {
  /** a name of VALIDATION_CATEGORIES (`appstore`, `testflight`, ...) */
  validationCategory?: string;
  bundleVersion?: string;
}

/**
 * The CBOR extensions map an iOS 27 device appends to authData, or nothing when `distribution`
 * says nothing: the category as Apple writes it (4 bytes, little-endian), the version as text.
 * @param distribution the category name and bundle version
 */
export function distributionExtensions(distribution: DistributionExtensions = {}): Uint8Array {
  const map = new Map<string, unknown>();
  if (distribution.validationCategory !== undefined) {
    const entry = Object.entries(VALIDATION_CATEGORIES).find(
      ([, name]) => name === distribution.validationCategory,
    );
    if (!entry) throw new Error(`unknown validation category "${distribution.validationCategory}"`);
    const bytes = Buffer.alloc(4);
    bytes.writeUInt32LE(Number(entry[0]), 0);
    map.set(VALIDATION_CATEGORY_KEY, bytes);
  }
  if (distribution.bundleVersion !== undefined)
    map.set(BUNDLE_VERSION_KEY, distribution.bundleVersion);
  return map.size === 0 ? new Uint8Array(0) : encodeCbor(map);
}

/**
 * An attestation object for `key` under the development CA, built as Apple's: x5c [leaf,
 * intermediate], authData with counter 0 and the environment's aaguid, the nonce extension.
 */
export async function mintAttestation(
  ca: DevCa,
  key: SimulatedKey,
  request: AttestationRequest,
): Promise<Uint8Array> {
  const x509 = peculiarX509();
  const point = uncompressedPoint(key.privateKey);
  const cose = encodeCbor(
    new Map<number, unknown>([
      [1, 2],
      [3, -7],
      [-1, 1],
      [-2, point.subarray(1, 33)],
      [-3, point.subarray(33, 65)],
    ]),
  );
  const credentialLength = Buffer.alloc(2);
  credentialLength.writeUInt16BE(key.keyId.length, 0);
  const authData = Buffer.concat([
    authDataHeader(request.appId, 0x40, 0),
    AAGUID[request.environment],
    credentialLength,
    key.keyId,
    cose,
    distributionExtensions(request.distribution),
  ]);
  const clientDataHash = request.wrongNonce
    ? sha256(Buffer.from('not the final nonce'), request.clientDataHash)
    : request.clientDataHash;

  const intermediate = new x509.X509Certificate(ca.intermediateCert);
  const signingKey = await subtle.importKey('pkcs8', ca.intermediateKey, P384, false, ['sign']);
  const leafPublicKey = await subtle.importKey(
    'spki',
    createPublicKey(key.privateKey).export({ type: 'spki', format: 'der' }),
    P256,
    true,
    ['verify'],
  );
  const t = request.now.getTime();
  const leaf = await x509.X509CertificateGenerator.create({
    serialNumber: `1${Buffer.from(key.keyId.subarray(0, 7)).toString('hex')}`,
    subject: `CN=${Buffer.from(key.keyId).toString('hex')}, OU=AAA Certification, O=attest development CA`,
    issuer: intermediate.subject,
    notBefore: new Date(request.expired ? t - 10 * DAY : t - HOUR),
    notAfter: new Date(request.expired ? t - 7 * DAY : t + 3 * DAY),
    publicKey: leafPublicKey,
    signingKey,
    signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.Extension(
        APPLE_NONCE_EXTENSION_OID,
        false,
        nonceExtensionValue(appAttestNonce(authData, clientDataHash)),
      ),
      ...(
        request.accessControl ?? (request.platform === 'macOS' ? [DEV_KEY_ACCESS_CONTROL] : [])
      ).map((value) => new x509.Extension(APPLE_KEY_ACCESS_CONTROL_OID, false, value)),
      // the platform is the OS name Apple signs into the leaf (keyPlatform.ts)
      ...(request.platform === 'macOS'
        ? [new x509.Extension(APPLE_OS_INFO_OID, false, devOsInformation('macosx'))]
        : []),
    ],
  });
  const receipt = request.receipt
    ? await mintReceipt(ca, {
        type: 'ATTEST',
        appId: request.appId,
        attestedCertificate: new Uint8Array(leaf.rawData),
        environment: request.environment,
        now: request.now,
      })
    : new Uint8Array(0);
  return encodeCbor(
    new Map<string, unknown>([
      ['fmt', 'apple-appattest'],
      [
        'attStmt',
        new Map<string, unknown>([
          ['x5c', [Buffer.from(leaf.rawData), Buffer.from(ca.intermediateCert)]],
          ['receipt', Buffer.from(receipt)],
        ]),
      ],
      ['authData', authData],
    ]),
  );
}

/** An assertion object by `key`: authenticatorData (flags 0x40, as devices set) and a DER signature. */
export function mintAssertion(
  key: SimulatedKey,
  request: {
    appId: string;
    counter: number;
    clientDataHash: Uint8Array;
    wrongNonce?: boolean;
    distribution?: DistributionExtensions;
  },
): Uint8Array {
  const authenticatorData = Buffer.concat([
    authDataHeader(request.appId, 0x40, request.counter),
    distributionExtensions(request.distribution),
  ]);
  const clientDataHash = request.wrongNonce
    ? sha256(Buffer.from('not the final nonce'), request.clientDataHash)
    : request.clientDataHash;
  const signature = sign(
    'sha256',
    appAttestNonce(authenticatorData, clientDataHash),
    key.privateKey,
  );
  return encodeCbor(
    new Map<string, unknown>([
      ['signature', signature],
      ['authenticatorData', authenticatorData],
    ]),
  );
}
