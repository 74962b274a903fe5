import type { KeyObject } from 'node:crypto';

/**
 * What is wrong with `key` as a key of Apple's App Attest and receipt chains, or null: real chains
 * use EC P-256 / P-384 and RSA 2048-4096 with e = 65537. Checked before any signature by the key,
 * so no certificate can make a check cost more than those keys do (a huge RSA exponent or modulus).
 * @param key a certificate's public key
 */
export function keyProfileProblem(key: KeyObject): string | null {
  const details = key.asymmetricKeyDetails;
  if (key.asymmetricKeyType === 'ec') {
    const curve = details?.namedCurve;
    return curve === 'prime256v1' || curve === 'secp384r1'
      ? null
      : `an EC key on ${curve ?? 'an unnamed curve'}, not P-256 or P-384`;
  }
  if (key.asymmetricKeyType === 'rsa') {
    const bits = details?.modulusLength ?? 0;
    if (bits < 2048 || bits > 4096) return `an RSA key of ${bits} bits, not 2048 to 4096`;
    if (details?.publicExponent !== 65537n) return 'an RSA key whose exponent is not 65537';
    return null;
  }
  return `a ${key.asymmetricKeyType ?? 'unknown'} key, neither EC nor RSA`;
}
