/**
 * Generates App Attest material at test time: a P-384 root and intermediate (as Apple's), P-256
 * device keys, leaf certificates with the nonce extension, attestation and assertion objects and
 * whole tokens, each with switches that break exactly one thing.
 *
 * P-384 keys are the slow part: make one CA per test file (`beforeAll`) and derive the rest.
 * Everything is built with @peculiar/x509 + WebCrypto (certificates), node:crypto (device
 * signatures) and cbor-x (objects); only the deliberately invalid encodings (duplicate keys,
 * indefinite lengths) are assembled from cbor-x-encoded parts by hand, since no encoder writes them.
 */
import {
  createHash,
  KeyObject,
  sign,
  webcrypto,
  X509Certificate as NodeCertificate,
} from 'node:crypto';
import * as x509 from '@peculiar/x509';
import { Encoder } from 'cbor-x';
import { encodeAppleToken as encodeToken } from '../../src/core/apple/appleToken.js';

// @peculiar/x509 picks up Node's global WebCrypto by itself.
type CryptoKeyPair = webcrypto.CryptoKeyPair;

/** The instant the factory's certificates are made around ("today" in these tests). */
export const TEST_NOW = new Date('2026-11-22T12:00:00Z');
export const TEST_APP_ID = 'ABCDE12345.com.example.attest';
export const NONCE_EXTENSION_OID = '1.2.840.113635.100.8.2';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const subtle = webcrypto.subtle;

// Shortest-form CBOR, byte strings untagged, maps with any key type: what devices send.
const cbor = new Encoder({
  useRecords: false,
  tagUint8Array: false,
  variableMapSize: true,
  mapsAsObjects: false,
} as never);

/** CBOR-encodes a value the way a device would. */
export function encodeCbor(value: unknown): Buffer {
  return Buffer.from(cbor.encode(value));
}

export const sha256 = (...parts: Uint8Array[]): Buffer => {
  const hash = createHash('sha256');
  for (const part of parts) hash.update(part);
  return hash.digest();
};

// ---- certificates ----

export interface TestCertificate {
  der: Buffer;
  cert: x509.X509Certificate;
  keys: CryptoKeyPair;
}

export interface Validity {
  notBefore: Date;
  notAfter: Date;
}

async function ecKeys(namedCurve: 'P-256' | 'P-384'): Promise<CryptoKeyPair> {
  return subtle.generateKey({ name: 'ECDSA', namedCurve }, true, [
    'sign',
    'verify',
  ]) as Promise<CryptoKeyPair>;
}

function wrap(cert: x509.X509Certificate, keys: CryptoKeyPair): TestCertificate {
  return { der: Buffer.from(cert.rawData), cert, keys };
}

/** A self-signed P-384 CA, like Apple's App Attestation Root CA. */
export async function createTestRoot(
  options: Partial<Validity> & { name?: string } = {},
): Promise<TestCertificate> {
  const keys = await ecKeys('P-384');
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: '01',
    name: options.name ?? 'CN=Test App Attestation Root CA, O=attest tests',
    notBefore: options.notBefore ?? new Date('2020-01-01T00:00:00Z'),
    notAfter: options.notAfter ?? new Date('2045-01-01T00:00:00Z'),
    keys,
    signingAlgorithm: { name: 'ECDSA', hash: 'SHA-384' },
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(
        x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign,
        true,
      ),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return wrap(cert, keys);
}

/** A P-384 intermediate signed by `issuer`; `ca: false` makes a certificate that must not issue. */
export async function createTestIntermediate(
  issuer: TestCertificate,
  options: Partial<Validity> & { ca?: boolean; name?: string } = {},
): Promise<TestCertificate> {
  const keys = await ecKeys('P-384');
  const ca = options.ca ?? true;
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: '02',
    subject: options.name ?? 'CN=Test App Attestation CA 1, O=attest tests',
    issuer: issuer.cert.subject,
    notBefore: options.notBefore ?? new Date('2020-01-01T00:00:00Z'),
    notAfter: options.notAfter ?? new Date('2040-01-01T00:00:00Z'),
    publicKey: keys.publicKey,
    signingKey: issuer.keys.privateKey,
    signingAlgorithm: { name: 'ECDSA', hash: 'SHA-384' },
    extensions: [
      new x509.BasicConstraintsExtension(ca, ca ? 0 : undefined, true),
      new x509.KeyUsagesExtension(
        ca
          ? x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign
          : x509.KeyUsageFlags.digitalSignature,
        true,
      ),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
      await x509.AuthorityKeyIdentifierExtension.create(issuer.keys.publicKey),
    ],
  });
  return wrap(cert, keys);
}

export interface TestCa {
  root: TestCertificate;
  intermediate: TestCertificate;
  /** the root as the verifier takes it */
  roots: NodeCertificate[];
  rootPem: string;
}

/** A root and an intermediate; call once per test file. */
export async function createTestCa(): Promise<TestCa> {
  const root = await createTestRoot();
  const intermediate = await createTestIntermediate(root);
  return {
    root,
    intermediate,
    roots: [new NodeCertificate(root.der)],
    rootPem: root.cert.toString('pem'),
  };
}

// ---- device keys ----

export interface DeviceKey {
  /** SHA-256 of the uncompressed point: the App Attest key id */
  keyId: Buffer;
  /** DER SubjectPublicKeyInfo */
  spki: Buffer;
  publicKey: KeyObject;
  privateKey: KeyObject;
  keys: CryptoKeyPair;
  /** uncompressed point 0x04 || X || Y */
  point: Buffer;
}

/** A P-256 key pair as the Secure Enclave makes them. */
export async function createDeviceKey(): Promise<DeviceKey> {
  const keys = await ecKeys('P-256');
  const point = Buffer.from(await subtle.exportKey('raw', keys.publicKey));
  const spki = Buffer.from(await subtle.exportKey('spki', keys.publicKey));
  return {
    keyId: sha256(point),
    spki,
    publicKey: KeyObject.from(keys.publicKey),
    privateKey: KeyObject.from(keys.privateKey),
    keys,
    point,
  };
}

/** The COSE_Key map of a device key (EC2, ES256, P-256). */
export function coseKey(device: DeviceKey): Map<number, unknown> {
  return new Map<number, unknown>([
    [1, 2],
    [3, -7],
    [-1, 1],
    [-2, device.point.subarray(1, 33)],
    [-3, device.point.subarray(33, 65)],
  ]);
}

// ---- authData ----

export const AAGUID = {
  Development: Buffer.from('appattestdevelop', 'ascii'),
  Production: Buffer.concat([Buffer.from('appattest', 'ascii'), Buffer.alloc(7)]),
} as const;

function header(rpIdHash: Uint8Array, flags: number, counter: number): Buffer {
  const fixed = Buffer.alloc(5);
  fixed.writeUInt8(flags, 0);
  fixed.writeUInt32BE(counter, 1);
  return Buffer.concat([rpIdHash, fixed]);
}

export interface AttestationAuthDataFields {
  rpIdHash: Uint8Array;
  flags: number;
  counter: number;
  aaguid: Uint8Array;
  credentialId: Uint8Array;
  /** encoded COSE key */
  coseKey: Uint8Array;
  /** encoded bytes appended after the COSE key (iOS 27 extensions, or junk) */
  trailer?: Uint8Array;
}

export function attestationAuthData(fields: AttestationAuthDataFields): Buffer {
  const length = Buffer.alloc(2);
  length.writeUInt16BE(fields.credentialId.length, 0);
  return Buffer.concat([
    header(fields.rpIdHash, fields.flags, fields.counter),
    fields.aaguid,
    length,
    fields.credentialId,
    fields.coseKey,
    fields.trailer ?? Buffer.alloc(0),
  ]);
}

export function assertionAuthData(fields: {
  rpIdHash: Uint8Array;
  flags: number;
  counter: number;
  trailer?: Uint8Array;
}): Buffer {
  return Buffer.concat([
    header(fields.rpIdHash, fields.flags, fields.counter),
    fields.trailer ?? Buffer.alloc(0),
  ]);
}

// ---- hand-assembled CBOR maps (for encodings no encoder writes) ----

/** A CBOR map from entries that may repeat a key; `indefinite` writes 0xbf ... 0xff. */
export function rawCborMap(
  entries: readonly (readonly [unknown, unknown])[],
  options: { indefinite?: boolean } = {},
): Buffer {
  if (!options.indefinite && entries.length > 23)
    throw new RangeError('rawCborMap: at most 23 entries');
  const head = Buffer.from([options.indefinite ? 0xbf : 0xa0 | entries.length]);
  const body = entries.flatMap(([k, v]) => [encodeCbor(k), encodeCbor(v)]);
  return Buffer.concat([head, ...body, options.indefinite ? Buffer.from([0xff]) : Buffer.alloc(0)]);
}

/** How an object's top-level map is written. */
export type ObjectEncoding =
  | 'strict'
  /** a decoy `authData` / `authenticatorData` before the real one (duplicate key) */
  | 'duplicateKey'
  /** indefinite-length top-level map */
  | 'indefinite'
  /** one stray byte after the item */
  | 'trailingBytes';

function encodeObject(
  entries: [string, unknown][],
  encoding: ObjectEncoding,
  decoyKey: string,
  decoy: unknown,
): Buffer {
  switch (encoding) {
    case 'strict':
      return encodeCbor(new Map(entries));
    case 'duplicateKey':
      return rawCborMap([[decoyKey, decoy], ...entries]);
    case 'indefinite':
      return rawCborMap(entries, { indefinite: true });
    case 'trailingBytes':
      return Buffer.concat([encodeCbor(new Map(entries)), Buffer.from([0x00])]);
  }
}

// ---- attestation ----

export interface X5cParts {
  leaf: Buffer;
  intermediate: Buffer;
  root: Buffer;
}

export interface AttestationOptions {
  appId?: string;
  environment?: 'Development' | 'Production';
  /** replaces the aaguid the environment picks */
  aaguid?: Uint8Array;
  /** the bytes appended to authData for the nonce; default SHA-256(`nonce`) */
  clientDataHash?: Uint8Array;
  /** the final nonce the device hashes; default `TEST_NONCE` */
  nonce?: Uint8Array;
  /** put this 32-byte value in the nonce extension instead of the right one */
  wrongNonce?: Uint8Array;
  /** leave the nonce extension out of the leaf */
  omitNonceExtension?: boolean;
  /** more leaf extensions (a Mac key's access-control blob, 1.2.840.113635.100.8.6) */
  leafExtensions?: x509.Extension[];
  counter?: number;
  /** default 0x40 (attested credential data), as Apple sets it */
  flags?: number;
  /** default the device key id */
  credentialId?: Uint8Array;
  /** iOS 27: a CBOR extensions map after the COSE key (flags stay 0x40) */
  extensions?: Map<unknown, unknown>;
  /** raw bytes after the COSE key (for malformed variants) */
  authDataTrailer?: Uint8Array;
  /** replaces the encoded COSE key */
  coseKeyBytes?: Uint8Array;
  /** the key the leaf certifies; default the device key (another key breaks the key id check) */
  leafKey?: DeviceKey;
  leafValidity?: Validity;
  /** signs the leaf; default the CA's intermediate */
  intermediate?: TestCertificate;
  /** the root the intermediate chains to, offered to `x5c` builders; default the CA's root */
  root?: TestCertificate;
  /** builds `attStmt.x5c` from the DER parts; default `[leaf, intermediate]` */
  x5c?: (parts: X5cParts) => unknown;
  /** default `apple-appattest` */
  fmt?: unknown;
  omitX5c?: boolean;
  encoding?: ObjectEncoding;
  /** `attStmt.receipt` (default the bytes "test receipt", which no receipt check accepts); null leaves it out */
  receipt?: Uint8Array | null;
}

export const TEST_NONCE = Buffer.alloc(32, 0x6e);

export interface BuiltAttestation {
  attestation: Buffer;
  authData: Buffer;
  leafDer: Buffer;
  clientDataHash: Buffer;
}

/** An attestation object for `device`, valid at `TEST_NOW` for `TEST_APP_ID` unless options break it. */
export async function createAttestation(
  ca: TestCa,
  device: DeviceKey,
  options: AttestationOptions = {},
): Promise<BuiltAttestation> {
  const environment = options.environment ?? 'Production';
  const clientDataHash = Buffer.from(options.clientDataHash ?? sha256(options.nonce ?? TEST_NONCE));
  const authData = attestationAuthData({
    rpIdHash: sha256(Buffer.from(options.appId ?? TEST_APP_ID, 'utf8')),
    flags: options.flags ?? 0x40,
    counter: options.counter ?? 0,
    aaguid: options.aaguid ?? AAGUID[environment],
    credentialId: options.credentialId ?? device.keyId,
    coseKey: options.coseKeyBytes ?? encodeCbor(coseKey(device)),
    trailer:
      options.authDataTrailer ?? (options.extensions ? encodeCbor(options.extensions) : undefined),
  });
  const nonce = options.wrongNonce ?? sha256(authData, clientDataHash);
  const intermediate = options.intermediate ?? ca.intermediate;
  const leafKey = options.leafKey ?? device;
  const validity = options.leafValidity ?? {
    notBefore: new Date(TEST_NOW.getTime() - DAY),
    notAfter: new Date(TEST_NOW.getTime() + 2 * DAY),
  };
  const extensions: x509.Extension[] = [
    new x509.BasicConstraintsExtension(false, undefined, true),
    new x509.KeyUsagesExtension(
      x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyAgreement,
      true,
    ),
  ];
  if (!options.omitNonceExtension) {
    // SEQUENCE { [1] EXPLICIT OCTET STRING (32 bytes) }, as Apple writes it
    extensions.push(
      new x509.Extension(
        NONCE_EXTENSION_OID,
        false,
        Buffer.concat([Buffer.from([0x30, 0x24, 0xa1, 0x22, 0x04, 0x20]), nonce]),
      ),
    );
  }
  const leaf = await x509.X509CertificateGenerator.create({
    serialNumber: device.keyId.subarray(0, 8).toString('hex'),
    subject: `CN=${leafKey.keyId.toString('hex')}, OU=AAA Certification, O=attest tests`,
    issuer: intermediate.cert.subject,
    notBefore: validity.notBefore,
    notAfter: validity.notAfter,
    publicKey: leafKey.keys.publicKey,
    signingKey: intermediate.keys.privateKey,
    signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
    extensions: [
      ...extensions,
      ...(options.leafExtensions ?? []),
      await x509.AuthorityKeyIdentifierExtension.create(intermediate.keys.publicKey),
    ],
  });
  const leafDer = Buffer.from(leaf.rawData);
  const parts: X5cParts = {
    leaf: leafDer,
    intermediate: intermediate.der,
    root: (options.root ?? ca.root).der,
  };
  const attStmt = new Map<string, unknown>(
    options.receipt === null ? [] : [['receipt', options.receipt ?? Buffer.from('test receipt')]],
  );
  if (!options.omitX5c)
    attStmt.set('x5c', options.x5c ? options.x5c(parts) : [parts.leaf, parts.intermediate]);
  const entries: [string, unknown][] = [
    ['fmt', options.fmt ?? 'apple-appattest'],
    ['attStmt', attStmt],
    ['authData', authData],
  ];
  // the decoy is a genuine-looking authData for another app: a parser keeping either copy is wrong
  const decoy = attestationAuthData({
    rpIdHash: sha256(Buffer.from('EVILTEAM99.com.example.decoy')),
    flags: 0x40,
    counter: 0,
    aaguid: AAGUID.Production,
    credentialId: device.keyId,
    coseKey: encodeCbor(coseKey(device)),
  });
  return {
    attestation: encodeObject(entries, options.encoding ?? 'strict', 'authData', decoy),
    authData,
    leafDer,
    clientDataHash,
  };
}

// ---- assertion ----

export interface AssertionOptions {
  appId?: string;
  counter?: number;
  /** default 0x40, as real devices set it (with no credential data following) */
  flags?: number;
  /** default SHA-256(`nonce`) */
  clientDataHash?: Uint8Array;
  nonce?: Uint8Array;
  /** sign with another key */
  signWith?: KeyObject;
  /** flip a bit of the signed nonce, so the signature is well-formed but wrong */
  corruptSignature?: boolean;
  /** replaces the signature bytes */
  signature?: Uint8Array;
  /** bytes after the 37-byte header */
  authDataTrailer?: Uint8Array;
  encoding?: ObjectEncoding;
}

export interface BuiltAssertion {
  assertion: Buffer;
  authenticatorData: Buffer;
  clientDataHash: Buffer;
}

/** An assertion object by `device`, valid for `TEST_APP_ID` with counter 1 unless options say otherwise. */
export function createAssertion(device: DeviceKey, options: AssertionOptions = {}): BuiltAssertion {
  const clientDataHash = Buffer.from(options.clientDataHash ?? sha256(options.nonce ?? TEST_NONCE));
  const authenticatorData = assertionAuthData({
    rpIdHash: sha256(Buffer.from(options.appId ?? TEST_APP_ID, 'utf8')),
    flags: options.flags ?? 0x40,
    counter: options.counter ?? 1,
    trailer: options.authDataTrailer,
  });
  const nonce = sha256(authenticatorData, clientDataHash);
  if (options.corruptSignature) nonce[0]! ^= 0x01;
  const signature =
    options.signature ?? sign('sha256', nonce, options.signWith ?? device.privateKey);
  const entries: [string, unknown][] = [
    ['signature', Buffer.from(signature)],
    ['authenticatorData', authenticatorData],
  ];
  const decoy = assertionAuthData({
    rpIdHash: sha256(Buffer.from('EVILTEAM99.com.example.decoy')),
    flags: 0x40,
    counter: 0xffffffff,
  });
  return {
    assertion: encodeObject(entries, options.encoding ?? 'strict', 'authenticatorData', decoy),
    authenticatorData,
    clientDataHash,
  };
}

// ---- tokens ----

export interface TokenFields {
  nonce?: Uint8Array;
  keyId: Uint8Array;
  attestation?: Uint8Array;
  assertion?: Uint8Array;
}

/** A format-1 token for the `apple` service (the encoder `attest dev mint` and `token wrap` ship). */
export function encodeAppleToken(fields: TokenFields): Buffer {
  return Buffer.from(encodeToken({ ...fields, nonce: fields.nonce ?? TEST_NONCE }));
}

export const days = (n: number): number => n * DAY;
