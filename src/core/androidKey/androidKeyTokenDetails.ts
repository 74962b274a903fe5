/** What the RP learns from an accepted `android-key` token (the answer's `androidKeyDetails`). */
/** Android hardware key attestation's security levels, weakest first. */
export type AndroidSecurityLevel = 'Software' | 'TrustedEnvironment' | 'StrongBox';
export type AndroidBootState = 'Verified' | 'SelfSigned' | 'Unverified' | 'Failed';

export interface AndroidKeyDetails extends AndroidKeyExtras {
  /** base64 (standard, padded) of the 32-byte key id */
  keyIdentifier: string;
  packageName: string;
  /** the lower of the attestation and KeyMint security levels */
  securityLevel: Exclude<AndroidSecurityLevel, 'Software'>;
  verifiedBootState: AndroidBootState;
  deviceLocked: boolean;
  /** YYYYMM, or null when the key description has none */
  osPatchLevel: number | null;
  attestationVersion: number;
}

/**
 * What a key's attestation says that no rule reads, shown in `androidKeyDetails` and kept with
 * the key; each only when the attestation carries it.
 */
export interface AndroidKeyExtras {
  /** [11] ML_DSA_VARIANT (attestation version 500): which ML-DSA parameter set */
  mlDsaVariant?: number;
  /** [405] USAGE_COUNT_LIMIT: how many times the key may be used */
  usageCountLimit?: number;
  /** [508] TRUSTED_CONFIRMATION_REQUIRED: the key signs only with Android Protected Confirmation */
  trustedConfirmationRequired?: true;
  /** [724] MODULE_HASH: the digest of the device's APEX modules, base64 */
  moduleHash?: string;
  /** AuthorizationList tags of a schema later than this service's, in the order met */
  unknownTags?: number[];
  /** the remote provisioning server's extension 1.3.6.1.4.1.11129.2.1.30, as data */
  provisioningInfo?: AndroidProvisioningInfo;
}

/** The provisioning information extension: its entries by key, key 1 also by its name. */
export interface AndroidProvisioningInfo {
  /** key 1: certificates the provisioning server has issued to the device */
  certificatesIssued?: number;
  entries: Record<string, number | string | boolean>;
}
