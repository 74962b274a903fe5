import type { AppleAppPolicy, AppleEnvPolicy, DeviceLimit } from '../core/types.js';
import type { ObserveChange } from './observeColumn.js';
import { APPLE_RULES, ruleColumns, type RuleColumn } from './policyColumns.js';
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

/** An App Attest entry from its row: every field, as the audit trail records it before and after a change. */
export function appleAppOf(row: AppleAppRow): AppleAppPolicy {
  return {
    appId: row.app_id,
    env: row.env as AppleEnvPolicy,
    requireReceipt: row.require_receipt,
    maxRiskMetric: row.max_risk_metric === null ? null : Number(row.max_risk_metric),
    validationCategories: parseTextArray(row.validation_categories),
    minBundleVersion: row.min_bundle_version,
    allowMissingValidationCategory: row.allow_missing_validation_category,
    observe: parseTextArray(row.observe),
    maxVerifiesPerDevice: deviceLimitOf(row),
  };
}

/** The App Attest table rules as `apple_apps` columns (see ruleColumns). */
export function appleRuleColumns(policy: ApplePolicyInput): RuleColumn[] {
  return ruleColumns(APPLE_RULES, policy);
}
