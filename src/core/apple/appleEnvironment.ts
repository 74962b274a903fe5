import type { AppleEnvPolicy } from '../ports.js';
import type { AppleEnvironment } from './appleTokenDetails.js';

/** AAGUID of keys made by the App Attest development environment: ASCII `appattestdevelop`. */
export const AAGUID_DEVELOPMENT = Buffer.from('appattestdevelop', 'ascii');
/** AAGUID of production keys: ASCII `appattest` followed by seven 0x00 bytes. */
export const AAGUID_PRODUCTION = Buffer.concat([
  Buffer.from('appattest', 'ascii'),
  Buffer.alloc(7),
]);

/**
 * The App Attest environment an AAGUID names, or `null` for any other value.
 * @param aaguid the 16 bytes after the counter in an attestation's authData
 */
export function environmentFromAaguid(aaguid: Uint8Array): AppleEnvironment | null {
  if (AAGUID_PRODUCTION.equals(aaguid)) return 'Production';
  if (AAGUID_DEVELOPMENT.equals(aaguid)) return 'Development';
  return null;
}

/**
 * Whether an allowlist entry's environment policy admits keys of `environment`.
 * @param policy `production`, `development` or `any`, as set by `attest allowlist add apple --env`
 * @param environment the key's environment, from its attestation
 */
export function environmentAllowed(policy: AppleEnvPolicy, environment: AppleEnvironment): boolean {
  if (policy === 'any') return true;
  return policy === 'production' ? environment === 'Production' : environment === 'Development';
}
