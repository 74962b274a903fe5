/** The checks of an `android-key` token (hardware key attestation), with what passing each means. */
export const ANDROID_KEY_CHECK_TITLES = {
  'android.shape': 'token shape fits the key (registration, or assertion of a registered key)',
  'android.certificates': 'certificateChain is DER certificates, the leaf with one KeyDescription',
  'android.chain':
    'chain verifies from a trusted attestation root key down, its keys and algorithms in profile (extension in the leaf only)',
  'android.levelClaim':
    "the key description's security levels agree with each other and with what the Google-signed certificates' subjects claim (StrongBox only under a StrongBox subject)",
  'android.revocation':
    'no certificate of the chain is revoked or suspended, by its serial number or the serial number in its subject',
  'android.challenge': 'attestationChallenge equals SHA-256(final nonce)',
  'android.keyId': 'keyId is SHA-256 of the leaf key, an EC P-256 or RSA 2048-4096 (e = 65537) key',
  'android.origin': 'the key was generated in the secure hardware (origin GENERATED), not imported',
  'android.patchFuture':
    'no attested patch level (OS, vendor, boot) is more than a month ahead of the verification time',
  'android.signature': 'signature over the final nonce verifies with the registered key',
  'android.package':
    "the attested app is the package, allowlisted for key attestation (and in a scoped API key's apps)",
  'android.appSignature': 'app signing certificate is allowlisted (when the package lists digests)',
  'android.securityLevel': 'attestation and KeyMint security levels meet the package minimum',
  'android.bootState': 'device is locked with a verified OS (or the package allows otherwise)',
  'android.patchLevel': 'OS patch level is recent enough (when the package sets a maximum age)',
  // verify-file passes this check without recording anything: the title must hold for both
  'android.register': 'key is new; the service registers it (verify-file does not)',
  'android.replay':
    'the first accepted assertion of this key over this final nonce (replays refused, whichever API key)',
  'android.deviceVelocity':
    "the key's verifies in the current window are within the package's per-device limit (when it sets one)",
  'android.issuerVelocity':
    "the issuing certificate's new keys for the package in the current window are within its --max-keys-per-issuer (when it sets one)",
} as const satisfies Record<string, string>;
