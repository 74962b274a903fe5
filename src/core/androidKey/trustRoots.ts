import { createHash, createPublicKey, type KeyObject } from 'node:crypto';
import { parseTrustRoots } from '../apple/trustRoots.js';
import {
  AOSP_SOFTWARE_EC_ROOT_KEY,
  AOSP_SOFTWARE_RSA_ROOT_KEY,
  GOOGLE_EC_ROOT_KEY,
  GOOGLE_RSA_ROOT_KEY,
} from './rootKeys.js';

/** A key an Android attestation chain may end at (or be signed by, the root left out). */
export interface AndroidRootKey {
  key: KeyObject;
  /** DER SubjectPublicKeyInfo */
  spki: Buffer;
  /** `google`: the built-in roots; `configured`: ATTEST_ANDROID_ROOT_CA or the development CA */
  kind: 'google' | 'configured';
  name: string;
}

function rootKey(pem: string, kind: AndroidRootKey['kind'], name: string): AndroidRootKey {
  const key = createPublicKey(pem);
  return { key, spki: key.export({ type: 'spki', format: 'der' }), kind, name };
}

let google: readonly AndroidRootKey[] | undefined;

/** Google's hardware attestation root keys: the RSA-4096 key and "Key Attestation CA1" (P-384). */
export function defaultAndroidRoots(): readonly AndroidRootKey[] {
  google ??= Object.freeze([
    rootKey(GOOGLE_RSA_ROOT_KEY, 'google', 'Google hardware attestation root (RSA-4096)'),
    rootKey(GOOGLE_EC_ROOT_KEY, 'google', 'Google Key Attestation CA1 (P-384)'),
  ]);
  return google;
}

let aosp: readonly { key: KeyObject; spki: Buffer }[] | undefined;

/** The AOSP software attestation root keys: never trusted, only recognised. */
export function aospSoftwareRoots(): readonly { key: KeyObject; spki: Buffer }[] {
  aosp ??= [AOSP_SOFTWARE_EC_ROOT_KEY, AOSP_SOFTWARE_RSA_ROOT_KEY].map((pem) => {
    const key = createPublicKey(pem);
    return { key, spki: key.export({ type: 'spki', format: 'der' }) };
  });
  return aosp;
}

/**
 * Root keys from a PEM file of CA certificates (ATTEST_ANDROID_ROOT_CA, the development CA):
 * each certificate's key is trusted, as Google's are. Throws on anything doubtful.
 * @param pem the PEM text
 */
export function parseAndroidRoots(pem: string): AndroidRootKey[] {
  return parseTrustRoots(pem).map((cert) => {
    const key = cert.publicKey;
    return {
      key,
      spki: key.export({ type: 'spki', format: 'der' }),
      kind: 'configured' as const,
      name: cert.subject.replace(/\n/g, ', '),
    };
  });
}

/** Root keys from DER certificates (the development CA root). */
export function androidRootsFromCertificates(ders: readonly Uint8Array[]): AndroidRootKey[] {
  return ders.flatMap((der) =>
    parseAndroidRoots(
      `-----BEGIN CERTIFICATE-----\n${Buffer.from(der).toString('base64')}\n-----END CERTIFICATE-----\n`,
    ),
  );
}

/** The SHA-256 of a key's SPKI, hex: how roots are named in logs. */
export function spkiFingerprint(spki: Uint8Array): string {
  return createHash('sha256').update(spki).digest('hex');
}
