/**
 * Hostile Android key attestation chains (issue 28, item 2), made at test time: every link of
 * them verifies, so a verifier that checks signatures before it knows the chain's root pays for
 * each one. `big-exponent`: the issuers share one RSA-3072 key whose public exponent has 3,064
 * bits (OpenSSL allows any exponent up to a 3072-bit modulus; each verification is then a full
 * exponentiation). `fan-out`: the issuers share one name and one key, so every certificate could
 * issue every other one (a path builder would try them all). Both end at an untrusted top unless a
 * test CA's root signs it.
 */
import { generatePrimeSync, webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import {
  androidChallenge,
  createAndroidDeviceKey,
  encodeKeyDescription,
} from '../../src/core/dev/androidKeyMint.js';
import { KEY_DESCRIPTION_OID } from '../../src/core/androidKey/keyDescription.js';
import { encodeAndroidKeyToken } from '../../src/core/androidKey/androidKeyToken.js';
import { ANDROID_PACKAGE, APP_DIGEST, type TestCertificate } from './androidFactory.js';

const subtle = webcrypto.subtle;
type CryptoKey = webcrypto.CryptoKey;

export interface HostileKey {
  publicKey: CryptoKey;
  privateKey: CryptoKey;
  signingAlgorithm: { name: string; hash: string };
}

function inverse(a: bigint, m: bigint): bigint {
  let [r0, r1, s0, s1] = [a % m, m, 1n, 0n];
  while (r1 !== 0n) {
    const q = r0 / r1;
    [r0, r1] = [r1, r0 - q * r1];
    [s0, s1] = [s1, s0 - q * s1];
  }
  if (r0 !== 1n) throw new Error('not invertible');
  return ((s0 % m) + m) % m;
}

const b64u = (n: bigint) => {
  const hex = n.toString(16);
  return Buffer.from(hex.length % 2 ? `0${hex}` : hex, 'hex').toString('base64url');
};

let bigExponent: Promise<HostileKey> | undefined;

/**
 * An RSA-3072 key pair whose public exponent has 3,064 bits (test-only key material: the primes
 * from node:crypto, the exponent's inverse computed here to put them into a JWK).
 */
export function bigExponentKey(): Promise<HostileKey> {
  bigExponent ??= (async () => {
    for (;;) {
      const p = generatePrimeSync(1536, { bigint: true });
      const q = generatePrimeSync(1536, { bigint: true });
      const n = p * q;
      if (n.toString(2).length !== 3072 || p === q) continue;
      const phi = (p - 1n) * (q - 1n);
      // an odd 3,064-bit exponent coprime to phi
      const random = BigInt(
        `0x${Buffer.from(webcrypto.getRandomValues(new Uint8Array(383))).toString('hex')}`,
      );
      let e = (1n << 3063n) | (random & ((1n << 3063n) - 1n)) | 1n;
      let d: bigint | undefined;
      for (let tries = 0; tries < 100 && d === undefined; tries++, e += 2n) {
        try {
          d = inverse(e, phi);
        } catch {
          // shares a factor with phi: the next odd number
        }
      }
      if (d === undefined) continue;
      e -= 2n;
      const jwk = {
        kty: 'RSA',
        n: b64u(n),
        e: b64u(e),
        d: b64u(d),
        p: b64u(p),
        q: b64u(q),
        dp: b64u(d % (p - 1n)),
        dq: b64u(d % (q - 1n)),
        qi: b64u(inverse(q, p)),
      };
      const algorithm = { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' };
      const privateKey = await subtle.importKey('jwk', { ...jwk, alg: 'RS256' }, algorithm, true, [
        'sign',
      ]);
      const publicKey = await subtle.importKey(
        'jwk',
        { kty: 'RSA', n: jwk.n, e: jwk.e, alg: 'RS256' },
        algorithm,
        true,
        ['verify'],
      );
      return { publicKey, privateKey, signingAlgorithm: algorithm };
    }
  })();
  return bigExponent;
}

/** An EC key pair (P-256 and P-384 are what real batch and RKP keys are); `hash` signs with it. */
export async function ecKey(
  curve: 'P-256' | 'P-384' | 'P-521' = 'P-256',
  hash = curve === 'P-256' ? 'SHA-256' : 'SHA-384',
): Promise<HostileKey> {
  const keys = (await subtle.generateKey({ name: 'ECDSA', namedCurve: curve }, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair;
  return { ...keys, signingAlgorithm: { name: 'ECDSA', hash } };
}

/**
 * Certificates that carry an RSA public key of `bits` (a random odd modulus: generating a real
 * 8192-bit key takes most of a minute) and are signed with a P-256 key: only for refusals by key.
 */
export async function rsaPublicKeyOnly(bits: number): Promise<HostileKey> {
  const modulus = Buffer.from(webcrypto.getRandomValues(new Uint8Array(bits / 8)));
  modulus[0]! |= 0x80;
  modulus[modulus.length - 1]! |= 1;
  const publicKey = await subtle.importKey(
    'jwk',
    { kty: 'RSA', n: modulus.toString('base64url'), e: 'AQAB', alg: 'RS256' },
    { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' },
    true,
    ['verify'],
  );
  const signer = await ecKey('P-256');
  return { ...signer, publicKey };
}

/** An RSA key pair of `bits` with public exponent `exponent`, signing with PKCS#1 v1.5 and SHA-256. */
export async function rsaKey(bits: number, exponent = 65537): Promise<HostileKey> {
  const hex = exponent.toString(16);
  const algorithm = {
    name: 'RSASSA-PKCS1-v1_5',
    hash: 'SHA-256',
    modulusLength: bits,
    publicExponent: new Uint8Array(Buffer.from(hex.length % 2 ? `0${hex}` : hex, 'hex')),
  };
  const keys = (await subtle.generateKey(algorithm, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair;
  return { ...keys, signingAlgorithm: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' } };
}

export interface HostileChainOptions {
  /** certificates in all, leaf included */
  length: number;
  /** the key every issuer shares */
  key: HostileKey;
  /** one name for every issuer (fan-out); otherwise "CN=Hostile CA n" */
  sharedName?: boolean;
  /** a test CA root that signs the top (a chain that is then valid); otherwise the top is self-signed */
  root?: TestCertificate;
  nonce: Uint8Array;
  /** a leaf signed by nobody in the chain (its link fails) */
  badLeaf?: boolean;
  /** the issuing certificates of an earlier chain made with the same options (a new leaf only) */
  issuing?: Uint8Array[];
  /** bytes of an extra extension in every issuing certificate (to make them large) */
  padding?: number;
}

/** A registration token whose chain is `options.length` certificates under one shared issuer key. */
export async function hostileChainToken(options: HostileChainOptions) {
  const { key } = options;
  const issuers = options.length - 1;
  const name = (i: number) =>
    options.sharedName ? 'CN=Fan-out CA, O=attest tests' : `CN=Hostile CA ${i}, O=attest tests`;
  const validity = {
    notBefore: new Date('2020-01-01T00:00:00Z'),
    notAfter: new Date('2040-01-01T00:00:00Z'),
  };
  const ders: Uint8Array[] = options.issuing ? [...options.issuing] : [];
  // the top first: self-signed under the shared key, or signed by the test root
  for (let i = issuers; i >= 1 && !options.issuing; i--) {
    const top = i === issuers;
    const signer = top && options.root ? options.root : null;
    const cert = await x509.X509CertificateGenerator.create({
      ...validity,
      serialNumber: (0x100 + i).toString(16),
      subject: name(i),
      issuer: signer ? signer.subject : name(top ? i : i + 1),
      publicKey: key.publicKey,
      signingKey: signer ? signer.keys.privateKey : key.privateKey,
      signingAlgorithm: signer
        ? { name: 'ECDSA', hash: signer.algorithm.namedCurve === 'P-256' ? 'SHA-256' : 'SHA-384' }
        : key.signingAlgorithm,
      extensions: [
        new x509.BasicConstraintsExtension(true, undefined, true),
        ...(options.padding
          ? [new x509.Extension('1.3.6.1.4.1.99999.1', false, new Uint8Array(options.padding))]
          : []),
      ],
    });
    ders.unshift(new Uint8Array(cert.rawData));
  }
  const device = createAndroidDeviceKey();
  const leafSigner = options.badLeaf ? await ecKey() : key;
  const leaf = await x509.X509CertificateGenerator.create({
    ...validity,
    serialNumber: '01',
    subject: 'CN=Android Keystore Key',
    issuer: name(1),
    publicKey: await subtle.importKey(
      'spki',
      device.spki,
      { name: 'ECDSA', namedCurve: 'P-256' },
      true,
      ['verify'],
    ),
    signingKey: leafSigner.privateKey,
    signingAlgorithm: leafSigner.signingAlgorithm,
    extensions: [
      new x509.Extension(
        KEY_DESCRIPTION_OID,
        false,
        encodeKeyDescription({
          challenge: androidChallenge(options.nonce),
          packages: [{ name: ANDROID_PACKAGE, version: 1 }],
          signatureDigests: [APP_DIGEST],
        }),
      ),
    ],
  });
  const chain = [new Uint8Array(leaf.rawData), ...ders];
  return {
    chain,
    device,
    token: encodeAndroidKeyToken({
      nonce: options.nonce,
      packageName: ANDROID_PACKAGE,
      keyId: device.keyId,
      certificateChain: chain,
    }),
  };
}
