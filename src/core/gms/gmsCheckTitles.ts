/** The checks of a `gms` token (Play Integrity), with what passing each means. */
export const GMS_CHECK_TITLES = {
  'gms.evidence': 'gms map has packageName and integrityToken',
  'gms.package': 'package is on the Android allowlist',
  'gms.decode': "Google's decodeIntegrityToken decodes the standard-request token",
  'gms.decrypt': 'integrity token decrypts (JWE A256KW + A256GCM) with the package key',
  'gms.signature': 'inner JWS (ES256) verifies with the package verification key',
  'gms.payload': 'payload has the Play Integrity verdict layout',
  'gms.nonce': 'requestDetails.nonce equals the final nonce',
  'gms.requestHash': 'requestDetails.requestHash equals base64url(SHA-256(final nonce))',
  'gms.packageMatch':
    "package names in the payload match the token (and the package is in a scoped API key's apps)",
  'gms.recognition': 'Play recognizes the app',
  'gms.certificate': 'signing certificate is allowlisted',
  'gms.integrity': 'device integrity meets the package minimum',
  'gms.licensing': 'the app is licensed to the user (when the package requires it)',
  'gms.playProtect': 'Play Protect verdict is accepted (when the package requires it)',
  'gms.appAccessRisk': 'no denied app-access risk is detected (when the package sets any)',
  'gms.deviceActivity': 'recent device activity is at most the package maximum (when set)',
  'gms.deviceRecall': 'no device recall bit the package denies is set (when set)',
  'gms.accountActivity': 'account activity is at least the package minimum (when set)',
  'gms.locationSpoofing':
    'no denied location spoofing risk is reported (when the package sets any)',
  'gms.freshness': 'token is fresh (not too old, not in the future)',
} as const satisfies Record<string, string>;
