import { createHash, createPublicKey } from 'node:crypto';
import { sql, type SQL } from 'drizzle-orm';
import type {
  AccountActivityLevel,
  DeviceActivityLevel,
  GoogleServiceAccount,
  MinVerdict,
  DeviceLimit,
} from '../core/ports.js';
import type { RecallBit } from '../core/gms/gmsTokenDetails.js';
import { auditSummary } from './auditedColumns.js';
import type { ObserveChange } from './observeColumn.js';
import { ANDROID_RULES, ruleColumns, type RuleColumn } from './policyColumns.js';
import { parseTextArray } from './textArray.js';

/** Policy fields of an Android package (Play Integrity and key attestation); undefined keeps the stored value. */
export interface AndroidPolicyInput {
  certificateDigests?: Uint8Array[];
  minVerdict?: MinVerdict;
  allowUnrecognized?: boolean;
  maxAgeSeconds?: number;
  requireLicensed?: boolean;
  /** accepted Play Protect verdicts; `[]` stops checking */
  playProtectVerdicts?: string[];
  /** denied appsDetected values; `[]` stops checking */
  denyAppAccessRisk?: string[];
  /** `null` stops checking */
  maxDeviceActivity?: DeviceActivityLevel | null;
  /** Play device recall bits that reject a token when set; `[]` stops checking */
  denyRecallBits?: RecallBit[];
  /** `null` stops checking */
  minAccountActivity?: AccountActivityLevel | null;
  /** denied locationSpoofingRiskVerdict values; `[]` stops checking */
  denyLocationSpoofing?: string[];
  /** `null` removes the stored service account */
  serviceAccount?: GoogleServiceAccount | null;
  /** hardware key attestation (`android-key`) */
  keyAttestation?: boolean;
  minSecurityLevel?: 'TrustedEnvironment' | 'StrongBox';
  allowUnlocked?: boolean;
  /** verifiedBootKey values of trusted self-signed OS builds; `[]` clears them */
  bootKeys?: Uint8Array[];
  /** `null` stops checking */
  maxPatchAgeMonths?: number | null;
  /** observed rules: codes to observe, to enforce again */
  observeChange?: ObserveChange;
  /** android-key; `null` stops counting */
  maxVerifiesPerDevice?: DeviceLimit | null;
  /** android-key `--max-keys-per-issuer`, stored as `N/SECONDS`; `null` stops counting */
  maxKeysPerIssuer?: string | null;
}

/** A Play Integrity key pair as the Play Console gives it, with its fingerprint. */
export interface AndroidKeyPairInput {
  id: string;
  decryptionKey: Uint8Array;
  verificationKey: Uint8Array;
}

/** An `android_packages` row as the driver returns it. */
export interface PackageRow {
  package_name: string;
  certificate_digests: string[] | string | null;
  min_verdict: string;
  allow_unrecognized: boolean;
  max_age_seconds: number;
  require_licensed: boolean;
  play_protect_verdicts: string[] | string | null;
  deny_app_access_risk: string[] | string | null;
  max_device_activity: string | null;
  deny_recall_bits: string[] | string | null;
  min_account_activity: string | null;
  deny_location_spoofing: string[] | string | null;
  service_account: Uint8Array | null;
  service_account_key_id: string | null;
  key_attestation: boolean;
  min_security_level: string;
  allow_unlocked: boolean;
  boot_keys: string[] | string | null;
  max_patch_age_months: number | null;
  observe: string[] | string | null;
  max_verifies_per_device: number | null;
  device_window_seconds: number | null;
}

/** An `android_key_pairs` row as the driver returns it (the keys still sealed). */
export interface PairRow {
  package_name: string;
  id: string;
  decryption_key: Uint8Array;
  verification_key: Uint8Array;
  master_key_id: string | null;
  test_only: boolean;
}

/** A test-only Play Integrity pair with the signing half that Google would hold. */
export interface TestKeyPair extends AndroidKeyPairInput {
  /** PKCS#8 DER of the EC P-256 signing key */
  signingKey: Uint8Array;
}

/**
 * `pairs(ids, test_ids)`: the fingerprints of a package's key pairs (live ones, test-only ones)
 * as the statement starts, as jsonb arrays.
 */
export function pairsBefore(packageName: string): SQL {
  return sql`pairs as (select coalesce(jsonb_agg(id order by created_at, id) filter (where not test_only), '[]'::jsonb) as ids,
                              coalesce(jsonb_agg(id order by created_at, id) filter (where test_only), '[]'::jsonb) as test_ids
                       from android_key_pairs where package_name = ${packageName})`;
}

/** The audit summary of a package row: every audited column and its key pair fingerprints (never key material). */
export function androidSummary(row: SQL, pairIds: SQL, testPairIds: SQL): SQL {
  return auditSummary('android_packages', row, { keyPairs: pairIds, testKeyPairs: testPairIds });
}

/**
 * What the audit trail shows of a service account: its email and the SHA-256 of its public key
 * (the private key never leaves the sealed column).
 */
export function serviceAccountFingerprint(account: GoogleServiceAccount): string {
  let spki: string;
  try {
    const der = createPublicKey(account.privateKey).export({ type: 'spki', format: 'der' });
    spki = `spki-sha256:${createHash('sha256').update(der).digest('hex')}`;
  } catch {
    spki = 'key unreadable';
  }
  return `${account.clientEmail} ${spki}`;
}

/** text[] of hex digests; a driver that does not parse arrays hands over the literal `{a,b}`. */
export function parseDigests(value: string[] | string | null): Uint8Array[] {
  return parseTextArray(value).map((hex) => new Uint8Array(Buffer.from(hex, 'hex')));
}

/** The gms and android-key table rules as `android_packages` columns (see ruleColumns). */
export function tableRuleColumns(policy: AndroidPolicyInput): RuleColumn[] {
  return ruleColumns(ANDROID_RULES, policy);
}
