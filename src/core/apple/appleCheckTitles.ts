/** The checks of an `apple` token (App Attest), with what passing each means. */
export const APPLE_CHECK_TITLES = {
  'apple.shape': 'token shape fits the key (registration, assertion, or both)',
  'apple.attestation.format': 'attestation object is apple-appattest with x5c and authData',
  'apple.attestation.chain': 'certificate chain leads to a trusted root at the verification time',
  'apple.attestation.nonce': 'leaf nonce extension equals SHA-256(authData || clientDataHash)',
  'apple.attestation.keyId': 'leaf public key and credentialId match keyId',
  'apple.attestation.appId':
    "rpIdHash is an allowlisted app ID (on a registration, also in a scoped API key's apps)",
  'apple.attestation.counter': 'attestation counter is 0',
  'apple.attestation.environment': 'App Attest environment is allowed for the app',
  'apple.attestation.platform':
    "the key's platform (iOS, or macOS by its key access-control extension) is allowed for the app (when it restricts platforms)",
  'apple.attestation.distribution':
    'validation category and bundle version (iOS 27+) are allowed for the app (when it restricts them)',
  'apple.attestation.receipt':
    "Apple's receipt verifies (CMS, one fixed path to Apple Root CA - G3, this key, ATTEST); checked last, after the assertion when one is sent; rejects only with --require-receipt",
  'apple.assertion.format': 'assertion object has signature and authenticatorData',
  'apple.assertion.signature': 'assertion signature verifies with the key',
  'apple.assertion.appId':
    "rpIdHash is the key's app ID, still allowlisted (and in a scoped API key's apps)",
  'apple.assertion.policy':
    "the key's risk metric, distribution and platform are within the app's limits (when it sets any)",
  'apple.assertion.counter': 'assertion counter is above the stored one',
  // verify-file passes this check without recording anything: the title must hold for both
  'apple.register': 'key is new; the service registers it (verify-file does not)',
  'apple.deviceVelocity':
    "the key's verifies in the current window are within the app's per-device limit (when it sets one)",
} as const satisfies Record<string, string>;
