import type { CheckId } from './checkTitles.js';
import type { AppScope } from './appScope.js';
import type { ObservableReason } from './observedRules.js';
import type { RejectReason } from './reasons.js';

export type { Service } from './services.js';
import type { Service } from './services.js';
// the fourth kind's details live in its folder
export type { GooglePcTokenDetails } from './googlePc/googlePcTokenDetails.js';
import type { GooglePcTokenDetails } from './googlePc/googlePcTokenDetails.js';

/**
 * The mode of an API key. Test keys also trust the deployment's development roots (its dev App
 * Attest CA and the test-only Play Integrity pairs); live keys never do.
 */
export type KeyMode = 'live' | 'test';

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

export type PlatformDetails =
  | { service: 'gms'; googleTokenDetails: GoogleTokenDetails }
  | { service: 'apple'; appleTokenDetails: AppleTokenDetails }
  | { service: 'android-key'; androidKeyDetails: AndroidKeyDetails }
  | { service: 'gms-pc'; googlePcTokenDetails: GooglePcTokenDetails };

/** `observed`: the check failed, and its entry observes the rule, so the verification went on */
export type CheckStatus = 'pass' | 'fail' | 'skip' | 'observed';

/** One step of a verification, as `verify-file` prints it. `id` is stable (docs/checks.md). */
export interface CheckRecord {
  /** a CheckId, or the reason when a verification fails outside any check */
  id: string;
  status: CheckStatus;
  detail: string;
  reason?: RejectReason;
}

/** Facts a verifier learned on its way, for logs and for `verify-file` hints. Never secrets. */
export interface VerifyFacts {
  service?: Service;
  keyId?: string; // base64
  /** apple, android-key: base64 of the device key's DER SubjectPublicKeyInfo (a result token's cnf.jwk) */
  devicePublicKey?: string;
  packageName?: string;
  appId?: string;
  environment?: AppleEnvironment;
  shape?: 'registration' | 'assertion' | 'attestation+assertion';
  /** apple: the validation category the token or key carries (iOS 27+) */
  validationCategory?: string;
  /** apple: where the key was made (macOS keys carry a key access-control extension) */
  platform?: ApplePlatform;
  /** apple registration: what became of the attestation's receipt */
  receipt?: 'valid' | 'missing' | 'invalid';
  /** apple registration: what failed in the receipt */
  receiptProblem?: string;
  /** gms: when the integrity token says it was issued (ISO 8601) */
  issuedAt?: string;
  /** apple assertion: its counter, and the counter stored for the key */
  counter?: number;
  storedCounter?: number;
  /** gms: set for a standard request (decoded by Google); absent for a classic one */
  request?: 'standard';
  /** gms: the payload field of a verdict the package requires but Google did not give */
  missingVerdict?: string;
  /** gms: the Play dialog the app can show so the user fixes the rejected verdict on the device */
  remediation?: RemediationDialog;
  /** android-key: what the key description says (registration) or the stored key (assertion) */
  securityLevel?: AndroidSecurityLevel;
  verifiedBootState?: AndroidBootState;
  deviceLocked?: boolean;
  osPatchLevel?: number | null;
  /** android-key: the key the top of the chain is signed by, when it is a known one */
  chainRoot?: 'google' | 'aosp-software' | 'configured';
  /** android-key: the serial (hex) of a revoked certificate in the chain */
  revokedSerial?: string;
  /** android-key: the attested device looks like an emulator (its attested product or model) */
  emulator?: boolean;
}

/** A Play Integrity remediation dialog: its name and the type code the app passes to showDialog. */
export interface RemediationDialog {
  dialog: string;
  typeCode: number;
}

export type VerifyOutcome =
  | {
      ok: true;
      details: PlatformDetails;
      checks: CheckRecord[];
      facts: VerifyFacts;
      /** the observed rules that failed (each once, in the order they failed); absent when none */
      observed?: ObservableReason[];
    }
  | { ok: false; reason: RejectReason; detail: string; checks: CheckRecord[]; facts: VerifyFacts };

/**
 * Records the steps of a verification. Verifiers call `plan` once they know their path, `pass`
 * after each check; a failing check throws `Rejection(reason, detail)` with `check` set via `fail`.
 */
export interface Trace {
  /** the ordered check ids this path will run; unreached ones are reported as skipped */
  plan(ids: readonly CheckId[]): void;
  pass(id: CheckId, detail: string): void;
  skip(id: CheckId, detail: string): void;
  /** names the check that is about to fail; the Rejection thrown next is attributed to it */
  current(id: CheckId): void;
  /**
   * The allowlist entry's observe set, once the verifier has read the entry (each call replaces
   * the set). Until then every policy rule is enforced.
   */
  observe(codes: readonly string[]): void;
  /**
   * A policy rule failed. When the entry observes `reason`, the failure is recorded and this
   * returns (the verification goes on); otherwise it throws `Rejection(enforcedAs ?? reason,
   * detail)` attributed to `id`. The only place that chooses between the two.
   */
  policyFailed(
    id: CheckId,
    reason: ObservableReason,
    detail: string,
    enforcedAs?: RejectReason,
  ): void;
  facts: VerifyFacts;
}

// ---- ports (implemented by src/db, or by in-memory stores in verify-file and tests) ----

export type AppleEnvPolicy = 'production' | 'development' | 'any';

export interface AppleAppPolicy {
  /** `TEAMID.bundle.id` */
  appId: string;
  env: AppleEnvPolicy;
  /** a registration whose receipt is missing or invalid is rejected (`apple_receipt_invalid`) */
  requireReceipt?: boolean;
  /** assertions from keys whose latest risk metric is above this are rejected (`apple_risk_exceeded`) */
  maxRiskMetric?: number | null;
  /** accepted validation categories (`appstore`, `testflight`...); absent or empty = not checked */
  validationCategories?: readonly string[];
  /** lowest accepted bundle version (dotted numbers); absent = not checked */
  minBundleVersion?: string | null;
  /** tokens without the iOS 27 extensions pass the two rules above */
  allowMissingValidationCategory?: boolean;
  /** accepted platforms (`ios`, `macos`); absent or empty = both */
  platforms?: readonly string[];
  /** reason codes whose failures are recorded but do not reject (observed rules); absent = none */
  observe?: readonly string[];
  /** valid verifies accepted per registered key and fixed window; absent or null = not counted */
  maxVerifiesPerDevice?: DeviceLimit | null;
}

/** `--max-verifies-per-device N/PERIOD`: at most `max` valid verifies per key in each window. */
export interface DeviceLimit {
  max: number;
  /** the window's length; windows start at multiples of it since the Unix epoch (UTC) */
  periodSeconds: number;
}

export type MinVerdict =
  'MEETS_BASIC_INTEGRITY' | 'MEETS_DEVICE_INTEGRITY' | 'MEETS_STRONG_INTEGRITY';

export interface AndroidKeyPair {
  /** stable id of the pair (for `allowlist` listing / retiring), e.g. a fingerprint */
  id: string;
  /** 32 raw bytes, AES-256 key wrapping key */
  decryptionKey: Uint8Array;
  /** DER SubjectPublicKeyInfo of an EC P-256 key */
  verificationKey: Uint8Array;
  /** made by `attest dev mint gms`: tried for test API keys only */
  testOnly?: boolean;
}

export interface AndroidPackagePolicy {
  packageName: string;
  keys: readonly AndroidKeyPair[];
  /** SHA-256 digests of allowed signing certificates, raw 32 bytes each; empty = not checked */
  certificateDigests: readonly Uint8Array[];
  minVerdict: MinVerdict;
  allowUnrecognized: boolean;
  maxAgeSeconds: number;
  /** `accountDetails.appLicensingVerdict` must be LICENSED */
  requireLicensed?: boolean;
  /** accepted `environmentDetails.playProtectVerdict` values; empty or absent = not checked */
  playProtectVerdicts?: readonly string[];
  /** `appsDetected` values that reject the token; empty or absent = not checked */
  denyAppAccessRisk?: readonly string[];
  /** highest accepted `recentDeviceActivity.deviceActivityLevel`; absent = not checked */
  maxDeviceActivity?: DeviceActivityLevel | null;
  /** device recall bits that reject the token when set (`gms_device_recalled`); empty or absent = not checked */
  denyRecallBits?: readonly RecallBit[];
  /** lowest accepted `accountDetails.accountActivity.activityLevel`; absent or null = not checked */
  minAccountActivity?: AccountActivityLevel | null;
  /** `environmentDetails.locationSpoofingRiskVerdict` values that reject the token; empty or absent = not checked */
  denyLocationSpoofing?: readonly string[];
  /** decodes standard-request tokens through Google; absent = standard requests are refused */
  serviceAccount?: GoogleServiceAccount | null;
  /** hardware key attestation (`android-key`) is allowed for the package; absent = no */
  keyAttestation?: boolean;
  /** the lowest accepted attestation and KeyMint security level; default TrustedEnvironment */
  minSecurityLevel?: Exclude<AndroidSecurityLevel, 'Software'>;
  /** devices that are unlocked or not Verified pass check 8 */
  allowUnlocked?: boolean;
  /** verifiedBootKey values (32 raw bytes each) of self-signed OS builds the package trusts */
  bootKeys?: readonly Uint8Array[];
  /** the oldest accepted osPatchLevel, in months before the verification time; null = not checked */
  maxPatchAgeMonths?: number | null;
  /** reason codes (gms and android-key) whose failures are recorded but do not reject; absent = none */
  observe?: readonly string[];
  /** android-key: valid verifies accepted per registered key and fixed window; absent or null = not counted */
  maxVerifiesPerDevice?: DeviceLimit | null;
  /** android-key: new keys accepted per issuing certificate and fixed window; absent or null = not counted */
  maxKeysPerIssuer?: DeviceLimit | null;
}

export type DeviceActivityLevel = 'LEVEL_1' | 'LEVEL_2' | 'LEVEL_3' | 'LEVEL_4';

/** Play's account activity levels that rank, least trusted first (`--min-account-activity`). */
export type AccountActivityLevel = 'UNUSUAL' | 'UNKNOWN' | 'TYPICAL_BASIC' | 'TYPICAL_STRONG';

/** The parts of a Google service-account key file that the OAuth JWT-bearer grant needs. A secret. */
export interface GoogleServiceAccount {
  clientEmail: string;
  privateKeyId?: string;
  /** PKCS#8 PEM of the RSA key */
  privateKey: string;
}

/**
 * Google's decodeIntegrityToken, as the Play Integrity verifier sees it (implemented outside
 * core). A token Google refuses (4xx) is `{ ok: false }`; no usable answer (unreachable, slow,
 * 429, 5xx, credentials refused) is thrown, so it is a fault and never a verdict.
 */
export interface IntegrityTokenDecoder {
  decode(request: {
    packageName: string;
    integrityToken: string;
    serviceAccount: GoogleServiceAccount;
    /** Google's method: decodeIntegrityToken (the default) or decodePcIntegrityToken (gms-pc) */
    method?: 'decodeIntegrityToken' | 'decodePcIntegrityToken';
  }): Promise<{ ok: true; payload: unknown } | { ok: false; problem: string }>;
}

export interface AllowlistReader {
  appleApp(appId: string): Promise<AppleAppPolicy | null>;
  appleApps(): Promise<readonly AppleAppPolicy[]>;
  androidPackage(packageName: string): Promise<AndroidPackagePolicy | null>;
  androidPackages(): Promise<readonly AndroidPackagePolicy[]>;
}

export interface AppleKeyRecord {
  keyId: Uint8Array; // 32 bytes
  publicKey: Uint8Array; // DER SPKI, EC P-256
  appId: string;
  environment: AppleEnvironment;
  counter: number;
  /** the mode of the API key that registered it (default live); test keys are refused to live keys */
  mode?: KeyMode;
  /** the latest risk metric from a refreshed receipt, when one is known */
  riskMetric?: number | null;
  /** iOS 27+: the validation category and bundle version the attestation carried */
  validationCategory?: string | null;
  bundleVersion?: string | null;
  /** where the key was made, from its attestation; absent = iOS (keys before macOS) */
  platform?: ApplePlatform;
  /** written at registration only: the attestation's receipt and what its check found */
  receipt?: AppleKeyReceipt | null;
}

/** The receipt kept with a key at registration (refresh replaces it later). */
export interface AppleKeyReceipt {
  bytes: Uint8Array;
  /** null when the receipt passed every check */
  problem: string | null;
  type: string | null;
  creationTime: Date | null;
  notBefore: Date | null;
  expirationTime: Date | null;
  riskMetric: number | null;
}

/**
 * Registered App Attest keys, partitioned by API key mode (docs/security.md, "Test mode is a
 * sandbox"): a key registered through a test key is another row than the same key registered
 * through a live key, so nothing a test key does (registering, raising a counter) changes what a
 * live key sees. `mode` defaults to live.
 */
export interface AppleKeyStore {
  find(keyId: Uint8Array, mode?: KeyMode): Promise<AppleKeyRecord | null>;
  /** INSERT ... ON CONFLICT DO NOTHING: false when the key was already registered in its mode */
  register(record: AppleKeyRecord): Promise<boolean>;
  /** UPDATE ... WHERE counter < $new RETURNING: false when the stored counter is not lower */
  raiseCounter(keyId: Uint8Array, counter: number, mode?: KeyMode): Promise<boolean>;
  /**
   * Optional: `raiseCounter` that also requires the stored key, app ID, environment, mode and
   * risk metric to be `expected`'s, in the same statement. With it the verifier may skip `find` for a key it has
   * seen: false means a replay or a changed row, and the verifier then reads the row again.
   */
  raiseCounterIfUnchanged?(expected: AppleKeyRecord, counter: number): Promise<boolean>;
}

/** What a registered Android key keeps: its public key and the facts of its key description. */
export interface AndroidKeyRecord {
  keyId: Uint8Array; // 32 bytes, SHA-256 of publicKey
  publicKey: Uint8Array; // DER SPKI, EC P-256 or RSA >= 2048
  packageName: string;
  attestationSecurityLevel: AndroidSecurityLevel;
  keyMintSecurityLevel: AndroidSecurityLevel;
  verifiedBootState: AndroidBootState;
  deviceLocked: boolean;
  /** 32 bytes or fewer (older devices), as the key description gives it */
  verifiedBootKey: Uint8Array;
  osPatchLevel: number | null;
  attestationVersion: number;
  /** the app's signing certificate digests, as attested */
  signatureDigests: readonly Uint8Array[];
  mode?: KeyMode;
  /** shown with every verify of the key; absent for keys registered before they were kept */
  extras?: AndroidKeyExtras;
}

/** Registered android-key keys, partitioned by API key mode as AppleKeyStore is. */
export interface AndroidKeyStore {
  find(keyId: Uint8Array, mode?: KeyMode): Promise<AndroidKeyRecord | null>;
  /** INSERT ... ON CONFLICT DO NOTHING: false when the key was already registered in its mode */
  register(record: AndroidKeyRecord): Promise<boolean>;
  /**
   * Records one accepted assertion of a key (SHA-256 of the key id and the signed final nonce) in
   * one INSERT ... ON CONFLICT DO NOTHING RETURNING: false when it was recorded before (a replay,
   * whichever API key of the mode sends it). Absent (verify-file): not guarded.
   */
  recordAssertion?(assertion: { digest: Uint8Array; mode: KeyMode; at: Date }): Promise<boolean>;
  /**
   * When an assertion with this digest was accepted (null: never), read-only: what verify-file
   * asks the database instead of recording, so that it names a replay as the server would.
   */
  assertionAcceptedAt?(digest: Uint8Array, mode: KeyMode): Promise<Date | null>;
}

/** One valid verify of a registered key, to be counted in its fixed window. */
export interface DeviceVerify {
  keyId: Uint8Array;
  /** the API key's mode: live and test keys count apart (default live) */
  mode?: KeyMode;
  /** the limit N: a verify is counted only while the window holds fewer (absent: no bound) */
  max?: number;
  service: 'apple' | 'android-key';
  /** floor(now / period) * period, on the verifier's clock */
  windowStart: Date;
  periodSeconds: number;
  /** the verification time (the verifier's clock) */
  at: Date;
}

/**
 * Per-device verify counts (`--max-verifies-per-device`), shared by every instance: one row per
 * key holding its current window.
 */
export interface DeviceVelocityStore {
  /**
   * Adds one to the key's count in `verify`'s window if it holds fewer than `max`, in one atomic
   * statement (a newer window or another period starts again at 1): the count with this verify
   * in it, or null when the window is full (nothing counted, so a refused verify never counts).
   */
  count(verify: DeviceVerify): Promise<number | null>;
}

/** One entry of Google's attestation status list. */
export interface RevocationEntry {
  status: string;
  reason?: string;
}

/** The attestation certificate status list, by serial number (as an integer). */
export interface RevocationList {
  /** the status of a serial, or undefined when the list does not name it */
  lookup(serial: bigint): RevocationEntry | undefined;
  readonly size: number;
}

/** What a platform verifier gets besides its evidence map. */
export interface PlatformContext {
  /** the final nonce (already checked equal to the token's `nonce` when one was expected) */
  nonce: Uint8Array;
  now: Date;
  /** verify-file only: replaces SHA-256(nonce) as App Attest clientDataHash */
  clientDataHash?: Uint8Array;
  /** verify-file only: replaces SHA-256(nonce) as the Android attestation challenge */
  challenge?: Uint8Array;
  /** the API key's apps: a token of another app is `app_not_in_key_scope`; absent = every app */
  appScope?: AppScope;
  trace: Trace;
}

/** One verifier per platform, behind this interface; chosen by `device.service` from a table. */
export interface PlatformVerifier {
  readonly service: Service;
  /** `evidence` is the decoded CBOR value under the token's `gms` / `apple` key (a Map, or undefined) */
  verify(evidence: unknown, ctx: PlatformContext): Promise<PlatformDetails>;
}
