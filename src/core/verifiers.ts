import type { X509Certificate } from 'node:crypto';
import type { PlatformVerifiers } from './verify.js';
import type { AllowlistReader, AppleKeyStore } from './types.js';

/** The platform table: one verifier per `device.service`. */
export function buildVerifiers(_deps: { allowlist: AllowlistReader; appleKeys: AppleKeyStore; appleRoots: readonly X509Certificate[] }): PlatformVerifiers {
  return {};
}

/** Trust roots for App Attest: the PEM given, else the built-in Apple root. */
export function loadAppleRoots(_pem?: string): X509Certificate[] {
  return [];
}
