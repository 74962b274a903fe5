/** What the RP learns from an accepted `apple` token (the answer's `appleTokenDetails`). */
export interface AppleTokenDetails {
  /** base64 (standard, padded) of the 32-byte key id */
  keyIdentifier: string;
  appId: string;
  environment: AppleEnvironment;
  assertionCounter: number;
  /**
   * Apple's risk metric from the key's latest refreshed receipt (attestations for this device and
   * app over 30 days), when one is known
   */
  riskMetric?: number;
  /** how the app was distributed (iOS 27+ `apple_validation_category_01`), when the device said */
  validationCategory?: string;
  /** the app's bundle version (iOS 27+ `apple_bundle_version_01`), when the device said */
  bundleVersion?: string;
  /** the platform that made the key: macOS keys carry a key access-control extension */
  platform: ApplePlatform;
}

/** Where an App Attest key was made: iPhone and iPad, or a Mac (macOS 27). */
export type ApplePlatform = 'iOS' | 'macOS';

export type AppleEnvironment = 'Development' | 'Production';
