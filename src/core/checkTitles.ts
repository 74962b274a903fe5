import { PC_CHECK_TITLES } from './googlePc/pcCheckTitles.js';

/**
 * The registry of checks: each id with what passing it means, in plain words (verify-file prints
 * these; docs/checks.md lists them). Verifiers name checks by `CheckId`, so a check without a
 * title here does not compile.
 */
export const CHECK_TITLES = {
  'token.decode': 'token is a strict CBOR map with v, nonce and device',
  'token.version': 'token format version is supported',
  'token.service': 'device.service has a verifier and its evidence map',
  'token.nonce': 'token nonce equals the final nonce',
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
  'android.issuerVelocity':
    "the issuing certificate's new keys for the package in the current window are within its --max-keys-per-issuer (when it sets one)",
  'android.register': 'key is new; the service registers it (verify-file does not)',
  'android.replay':
    'the first accepted assertion of this key over this final nonce (replays refused, whichever API key)',
  'android.deviceVelocity':
    "the key's verifies in the current window are within the package's per-device limit (when it sets one)",
  ...PC_CHECK_TITLES,
} as const satisfies Record<string, string>;

export type CheckId = keyof typeof CHECK_TITLES;

/** The title of a recorded check id (a failure outside any check records its reason instead). */
export function checkTitle(id: string): string | undefined {
  return Object.hasOwn(CHECK_TITLES, id) ? CHECK_TITLES[id as CheckId] : undefined;
}
