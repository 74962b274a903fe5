/**
 * Android key attestation material made at test time: a private P-384 root and intermediate
 * (factory-style, or remotely provisioned with the provisioning-info extension), leaves carrying
 * a KeyDescription (src/core/dev/androidKeyMint.ts, what `dev mint android-key` uses), whole
 * registration and assertion tokens, each with switches that break exactly one rule.
 */
import { webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import { PROVISIONING_INFO_OID } from '../../src/core/androidKey/attestationChain.js';
import { KEY_DESCRIPTION_OID } from '../../src/core/androidKey/keyDescription.js';
import { parseAndroidRoots, type AndroidRootKey } from '../../src/core/androidKey/trustRoots.js';
import {
  androidChallenge,
  createAndroidDeviceKey,
  encodeKeyDescription,
  mintAttestationLeaf,
  signAndroidAssertion,
  type AndroidDeviceKey,
  type KeyDescriptionFields,
} from '../../src/core/dev/androidKeyMint.js';
import { encodeAndroidKeyToken } from '../../src/core/androidKey/androidKeyToken.js';
import { DEFAULT_ANDROID_POLICY } from '../../src/core/gms/defaultAndroidPolicy.js';
import type { AndroidPackagePolicy } from '../../src/core/ports.js';

const subtle = webcrypto.subtle;
type CryptoKeyPair = webcrypto.CryptoKeyPair;
const P384 = { name: 'ECDSA', namedCurve: 'P-384' } as const;
const P256 = { name: 'ECDSA', namedCurve: 'P-256' } as const;

export const ANDROID_PACKAGE = 'com.example.attest';
/** "today" in these tests; the factory's default patch level 202611 is current then */
export const ANDROID_NOW = new Date('2026-11-22T12:00:00Z');
export const APP_DIGEST = new Uint8Array(32).fill(0xa7);

export interface TestCertificate {
  der: Uint8Array;
  keys: CryptoKeyPair;
  pkcs8: Uint8Array;
  subject: string;
  /** the certificate's key pair (to sign with its `pkcs8`) */
  algorithm: typeof P384 | typeof P256;
}

async function certificate(options: {
  subject: string;
  issuer?: TestCertificate;
  serialNumber?: string;
  notBefore?: Date;
  notAfter?: Date;
  extensions?: x509.Extension[];
  algorithm?: typeof P384 | typeof P256;
}): Promise<TestCertificate> {
  const algorithm = options.algorithm ?? P384;
  const keys = (await subtle.generateKey(algorithm, true, ['sign', 'verify'])) as CryptoKeyPair;
  const common = {
    notBefore: options.notBefore ?? new Date('2020-01-01T00:00:00Z'),
    notAfter: options.notAfter ?? new Date('2040-01-01T00:00:00Z'),
    signingAlgorithm: {
      name: 'ECDSA',
      hash: (options.issuer?.algorithm ?? algorithm) === P256 ? 'SHA-256' : 'SHA-384',
    },
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      ...(options.extensions ?? []),
    ],
  };
  const cert = options.issuer
    ? await x509.X509CertificateGenerator.create({
        ...common,
        serialNumber: options.serialNumber ?? '0a',
        subject: options.subject,
        issuer: options.issuer.subject,
        publicKey: keys.publicKey,
        signingKey: options.issuer.keys.privateKey,
      })
    : await x509.X509CertificateGenerator.createSelfSigned({
        ...common,
        serialNumber: '0b',
        name: options.subject,
        keys,
      });
  return {
    der: new Uint8Array(cert.rawData),
    keys,
    pkcs8: new Uint8Array(await subtle.exportKey('pkcs8', keys.privateKey)),
    subject: cert.subject,
    algorithm,
  };
}

export interface AndroidTestCa {
  root: TestCertificate;
  intermediate: TestCertificate;
  /** the root's key, as the verifier takes it (ATTEST_ANDROID_ROOT_CA) */
  roots: AndroidRootKey[];
  rootPem: string;
}

/**
 * The test intermediate's subject: factory-style, as Google's verifier tells one (a serialNumber
 * attribute), with no security level claim, so TEE keys pass the level cross-check.
 */
export const TEST_INTERMEDIATE_SUBJECT = '2.5.4.5=7e57ca01, CN=Test Droid CA, O=attest tests';
/** Attestation certificate subjects as real chains write them (factory: title; remote: O). */
export const FACTORY_STRONGBOX_SUBJECT = '2.5.4.5=5b0c5b0c, 2.5.4.12=StrongBox';
export const FACTORY_TEE_SUBJECT = '2.5.4.5=7eee7eee, 2.5.4.12=TEE';

/** A root and an intermediate; `remote` marks the intermediate remotely provisioned. */
export async function createAndroidTestCa(
  options: {
    /** the intermediate's subject (default TEST_INTERMEDIATE_SUBJECT) */
    intermediateSubject?: string;
    remote?: boolean;
    intermediateValidity?: { notBefore: Date; notAfter: Date };
    intermediateExtensions?: x509.Extension[];
  } = {},
): Promise<AndroidTestCa> {
  const root = await certificate({ subject: 'CN=Test Android Attestation Root, O=attest tests' });
  const extensions = [...(options.intermediateExtensions ?? [])];
  if (options.remote)
    extensions.push(new x509.Extension(PROVISIONING_INFO_OID, false, new Uint8Array([0xa0])));
  // P-256, as the batch and RKP keys that sign real devices' leaves are (every chain in
  // test/fixtures/android-key has a P-256 or RSA-2048 signer): a P-384 one had made each
  // registration's leaf check three times what a real device's costs
  const intermediate = await certificate({
    subject: options.intermediateSubject ?? TEST_INTERMEDIATE_SUBJECT,
    issuer: root,
    algorithm: P256,
    ...options.intermediateValidity,
    extensions,
  });
  const rootPem = x509.PemConverter.encode(root.der.buffer as ArrayBuffer, 'CERTIFICATE');
  return { root, intermediate, roots: parseAndroidRoots(rootPem), rootPem };
}

/** A second intermediate whose certificate carries a key description (an ATTEST_KEY chain). */
export async function intermediateWithKeyDescription(ca: AndroidTestCa): Promise<TestCertificate> {
  return certificate({
    subject: 'CN=Test Attest Key, O=attest tests',
    issuer: ca.root,
    extensions: [
      new x509.Extension(
        KEY_DESCRIPTION_OID,
        false,
        encodeKeyDescription({ challenge: new Uint8Array(32) }),
      ),
    ],
  });
}

export interface RegistrationOptions {
  nonce: Uint8Array;
  device?: AndroidDeviceKey;
  packageName?: string;
  /** KeyDescription fields over the defaults (TEE, locked+Verified, patch 202611, the package) */
  description?: Partial<KeyDescriptionFields>;
  /** the leaf's serial (hex) */
  serialHex?: string;
  /** include the root certificate at the end of the chain */
  includeRoot?: boolean;
  /** the issuing certificate to use instead of the CA's intermediate */
  issuer?: TestCertificate;
  /** the key description twice, or not at all */
  descriptions?: 0 | 2;
  issuerName?: string;
  keyId?: Uint8Array;
  /** the chain as sent (after it is built), e.g. to wrap an entry in PEM */
  editChain?: (chain: Uint8Array[]) => Uint8Array[];
  /**
   * an attestation certificate between the leaf and the issuer, as real chains have one (its
   * subject carries the level claim; remote ones carry the provisioning information)
   */
  attestation?: { subject: string; serialNumber?: string; extensions?: x509.Extension[] };
}

/** A registration token (and its device key) over `options.nonce`. */
export async function androidRegistration(ca: AndroidTestCa, options: RegistrationOptions) {
  const device = options.device ?? createAndroidDeviceKey();
  const packageName = options.packageName ?? ANDROID_PACKAGE;
  const description = encodeKeyDescription({
    challenge: androidChallenge(options.nonce),
    packages: [{ name: packageName, version: 1 }],
    signatureDigests: [APP_DIGEST],
    ...options.description,
  });
  const upper = options.issuer ?? ca.intermediate;
  const issuer = options.attestation
    ? await certificate({
        subject: options.attestation.subject,
        issuer: upper,
        algorithm: P256,
        serialNumber: options.attestation.serialNumber ?? '0c',
        extensions: options.attestation.extensions ?? [],
      })
    : upper;
  const leaf = await mintAttestationLeaf(
    { cert: issuer.der, key: issuer.pkcs8, algorithm: issuer.algorithm },
    device,
    {
      now: ANDROID_NOW,
      ...(options.serialHex ? { serialHex: options.serialHex } : {}),
      keyDescriptions:
        options.descriptions === 0
          ? []
          : options.descriptions === 2
            ? [description, description]
            : [description],
      ...(options.issuerName ? { issuerName: options.issuerName } : {}),
    },
  );
  let chain = [
    leaf,
    issuer.der,
    ...(issuer !== upper ? [upper.der] : []),
    ...(options.includeRoot ? [ca.root.der] : []),
  ];
  if (options.editChain) chain = options.editChain(chain);
  const token = encodeAndroidKeyToken({
    nonce: options.nonce,
    packageName,
    keyId: options.keyId ?? device.keyId,
    certificateChain: chain,
  });
  return { token, device, chain };
}

/** An assertion token by `device` over `nonce`. */
export function androidAssertion(
  device: AndroidDeviceKey,
  nonce: Uint8Array,
  options: { packageName?: string; signature?: Uint8Array } = {},
): Uint8Array {
  return encodeAndroidKeyToken({
    nonce,
    packageName: options.packageName ?? ANDROID_PACKAGE,
    keyId: device.keyId,
    signature: options.signature ?? signAndroidAssertion(device, nonce),
  });
}

/** The package's allowlist entry with key attestation on, and `overrides`. */
export function androidKeyPolicy(
  overrides: Partial<AndroidPackagePolicy> = {},
): AndroidPackagePolicy {
  return {
    ...DEFAULT_ANDROID_POLICY,
    packageName: ANDROID_PACKAGE,
    keys: [],
    keyAttestation: true,
    ...overrides,
  };
}
