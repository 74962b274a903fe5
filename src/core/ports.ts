/**
 * The ports core verifies through: the allowlist, the key stores, Google's decoder, the
 * revocation list (implemented by src/db, or by in-memory stores in verify-file and tests), and
 * the interface each platform verifier implements.
 */
import type { DeviceKeyService } from './services.js';
import type {
  AndroidBootState,
  AndroidKeyExtras,
  AndroidSecurityLevel,
} from './androidKey/androidKeyTokenDetails.js';
import type { AppleEnvironment, ApplePlatform } from './apple/appleTokenDetails.js';
import type { AppScope } from './appScope.js';
import type { RecallBit } from './gms/gmsTokenDetails.js';
import type { PlatformDetails } from './kinds.js';
import type { Trace } from './outcome.js';
import type { Service } from './services.js';

/**
 * The mode of an API key. Test keys also trust the deployment's development roots (its dev App
 * Attest CA and the test-only Play Integrity pairs); live keys never do.
 */
export type KeyMode = 'live' | 'test';

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
  /** android-key: new keys accepted per issuing certificate and fixed window; absent or null = not counted */
  maxKeysPerIssuer?: DeviceLimit | null;
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

/** A Play Integrity decode method of Google's: decodeIntegrityToken, decodePcIntegrityToken... */
export type PlayDecodeMethod = `decode${string}IntegrityToken`;

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
    /** Google's method: decodeIntegrityToken (the default), or the one a Play kind names */
    method?: PlayDecodeMethod;
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
  service: DeviceKeyService;
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
