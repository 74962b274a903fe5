import type { AppleAppPolicy, AppleEnvPolicy, DeviceLimit } from '../core/ports.js';
import type { ObserveChange } from './observeColumn.js';
import { APPLE_RULES, ruleColumns, ruleValuesOf, type RuleColumn } from './policyColumns.js';
import { parseTextArray } from './textArray.js';

/** Policy fields of an App Attest entry; undefined keeps the stored value. */
export interface ApplePolicyInput {
  requireReceipt?: boolean;
  /** `null` stops checking */
  maxRiskMetric?: number | null;
  /** `[]` stops checking */
  validationCategories?: string[];
  /** `null` stops checking */
  minBundleVersion?: string | null;
  allowMissingValidationCategory?: boolean;
  /** `[]` accepts every platform */
  platforms?: string[];
  /** observed rules: codes to observe, to enforce again */
  observeChange?: ObserveChange;
  /** `null` stops counting */
  maxVerifiesPerDevice?: DeviceLimit | null;
}

/** An `apple_apps` row as the driver returns it. */
export interface AppleAppRow {
  app_id: string;
  env: string;
  require_receipt: boolean;
  max_risk_metric: number | null;
  validation_categories: string[] | string | null;
  min_bundle_version: string | null;
  allow_missing_validation_category: boolean;
  platforms: string[] | string | null;
  observe: string[] | string | null;
  max_verifies_per_device: number | null;
  device_window_seconds: number | null;
}

/** The `--max-verifies-per-device` of a row (apple_apps or android_packages); null = not counted. */
export function deviceLimitOf(row: {
  max_verifies_per_device: number | null;
  device_window_seconds: number | null;
}): DeviceLimit | null {
  if (row.max_verifies_per_device === null || row.device_window_seconds === null) return null;
  return {
    max: Number(row.max_verifies_per_device),
    periodSeconds: Number(row.device_window_seconds),
  };
}

/** The rules an App Attest entry's table declares (read from their columns by the table). */
type AppleRules = Omit<AppleAppPolicy, 'appId' | 'env' | 'observe' | 'maxVerifiesPerDevice'>;

/** An App Attest entry from its row: every field, as the audit trail records it before and after a change. */
export function appleAppOf(row: AppleAppRow): AppleAppPolicy {
  return {
    appId: row.app_id,
    env: row.env as AppleEnvPolicy,
    ...(ruleValuesOf(APPLE_RULES, row) as AppleRules),
    observe: parseTextArray(row.observe),
    maxVerifiesPerDevice: deviceLimitOf(row),
  };
}

/** The App Attest table rules as `apple_apps` columns (see ruleColumns). */
export function appleRuleColumns(policy: ApplePolicyInput): RuleColumn[] {
  return ruleColumns(APPLE_RULES, policy);
}
