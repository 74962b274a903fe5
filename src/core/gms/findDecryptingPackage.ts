import type { AndroidPackagePolicy } from '../ports.js';
import { importDecryptionKey } from './keyMaterial.js';
import { decryptWith } from './openIntegrityToken.js';

/**
 * Finds which allowlisted package's keys decrypt a Play Integrity token, for the `verify-file`
 * hint "this token was encrypted with another allowlisted package's keys" after a
 * `gms_decrypt_failed`. Decryption only: it says whose key sealed the token, not that the token
 * is valid. Pure: keys are imported for this call and nothing is kept or written.
 * @param integrityToken the compact JWE
 * @param packages the allowlisted packages to try (the caller may leave out the claimed one)
 * @returns the first package (in the given order) with a pair that decrypts it, or `null`
 */
export async function findDecryptingPackage(
  integrityToken: string,
  packages: readonly AndroidPackagePolicy[],
): Promise<string | null> {
  for (const policy of packages) {
    for (const pair of policy.keys) {
      const key = await importDecryptionKey(pair.decryptionKey).catch(() => null);
      if (!key) continue;
      const opened = await decryptWith(integrityToken, key);
      if (opened.ok) return policy.packageName;
      // outside the pins or not a compact JWE: no key anywhere opens it
      if (opened.keyIndependent) return null;
    }
  }
  return null;
}
