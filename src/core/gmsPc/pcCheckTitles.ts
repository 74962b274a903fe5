/** The checks of a `gms-pc` token (Play Integrity for PC), listed by its kind descriptor. */
export const PC_CHECK_TITLES = {
  'gmsPc.evidence': 'gms-pc map has packageName and integrityToken',
  'gmsPc.package': 'package is on the Android allowlist with a service account',
  'gmsPc.decode': "Google's decodePcIntegrityToken decodes the PC token",
  'gmsPc.payload': 'Play Integrity for PC verdict layout',
  'gmsPc.requestHash': 'requestDetails.requestHash equals base64url(SHA-256(final nonce))',
  'gmsPc.packageMatch': 'requestDetails.requestPackageName equals the allowlisted package',
  'gmsPc.integrity': 'deviceRecognitionVerdict holds MEETS_PC_INTEGRITY',
  'gmsPc.freshness': 'requestDetails.requestTime is within the maximum age of the package',
} as const satisfies Record<string, string>;
