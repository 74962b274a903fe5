import type { X509Certificate } from 'node:crypto';
import { createAppleVerifier } from './apple/appleVerifier.js';
import { defaultAppleRoots, parseTrustRoots } from './apple/trustRoots.js';
import { createGoogleVerifier } from './google/googleVerifier.js';
import type { AllowlistReader, AppleKeyStore } from './types.js';
import type { PlatformVerifiers } from './verify.js';

/** The platform table: one verifier per `device.service`. */
export function buildVerifiers(deps: { allowlist: AllowlistReader; appleKeys: AppleKeyStore; appleRoots: readonly X509Certificate[] }): PlatformVerifiers {
  return {
    apple: createAppleVerifier({ roots: deps.appleRoots, allowlist: deps.allowlist, keys: deps.appleKeys }),
    gms: createGoogleVerifier({ allowlist: deps.allowlist }),
  };
}

/** Trust roots for App Attest: the PEM given (ATTEST_APPLE_ROOT_CA), else the built-in Apple root. */
export function loadAppleRoots(pem?: string): readonly X509Certificate[] {
  return pem === undefined ? defaultAppleRoots() : parseTrustRoots(pem);
}
