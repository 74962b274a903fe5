import type { X509Certificate } from 'node:crypto';
import { createAppleVerifier } from './apple/appleVerifier.js';
import { defaultAppleRoots, parseTrustRoots } from './apple/trustRoots.js';
import { createGoogleVerifier } from './google/googleVerifier.js';
import type { AllowlistReader, AppleKeyStore, IntegrityTokenDecoder } from './types.js';
import type { PlatformVerifiers } from './verify.js';

/** The platform table: one verifier per `device.service`. */
export function buildVerifiers(deps: {
  allowlist: AllowlistReader;
  appleKeys: AppleKeyStore;
  appleRoots: readonly X509Certificate[];
  /** Google's decodeIntegrityToken (standard requests); without it they are a fault */
  googleDecoder?: IntegrityTokenDecoder;
}): PlatformVerifiers {
  return {
    apple: createAppleVerifier({ roots: deps.appleRoots, allowlist: deps.allowlist, keys: deps.appleKeys }),
    gms: createGoogleVerifier({ allowlist: deps.allowlist, ...(deps.googleDecoder ? { decoder: deps.googleDecoder } : {}) }),
  };
}

/** Trust roots for App Attest: the PEM given (ATTEST_APPLE_ROOT_CA), else the built-in Apple root. */
export function loadAppleRoots(pem?: string): readonly X509Certificate[] {
  return pem === undefined ? defaultAppleRoots() : parseTrustRoots(pem);
}
