/** What the RP learns from an accepted `gms` token (the answer's `googleTokenDetails`). */
export interface GoogleTokenDetails {
  packageName: string;
  deviceIntegrityVerdicts: string[];
  timestampMillis: number;
  // extensions for RP telemetry, each only when the payload carries it
  appLicensingVerdict?: string;
  playProtectVerdict?: string;
  appsDetected?: string[];
  deviceActivityLevel?: string;
  /** `accountDetails.accountActivity.activityLevel` */
  accountActivityLevel?: string;
  /** `environmentDetails.locationSpoofingRiskVerdict` */
  locationSpoofingRiskVerdict?: string[];
  /** `deviceIntegrity.legacyDeviceRecognitionVerdict`: the old rules' verdict, during Google's transition */
  legacyDeviceIntegrityVerdicts?: string[];
  /** Play device recall: the three bits the app's developer wrote for this device, and when */
  deviceRecall?: DeviceRecallDetails;
  sdkVersion?: number;
  versionCode?: string;
}

/** `deviceIntegrity.deviceRecall` as Google names it: the bits, and the write month of each bit set. */
export interface DeviceRecallDetails {
  bitFirst: boolean;
  bitSecond: boolean;
  bitThird: boolean;
  /** YYYYMM (UTC) of each set bit's last write, where Google gives it */
  writeDates?: { yyyymmFirst?: number; yyyymmSecond?: number; yyyymmThird?: number };
}

/** One of the three Play device recall bits, as the CLI and the policy name it. */
export type RecallBit = 'first' | 'second' | 'third';

/** A Play Integrity remediation dialog: its name and the type code the app passes to showDialog. */
export interface RemediationDialog {
  dialog: string;
  typeCode: number;
}
