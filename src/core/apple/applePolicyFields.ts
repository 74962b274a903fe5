import { z } from 'zod';
import {
  deviceLimitField,
  OBSERVED_RULES_FIELD,
  switchField,
  textSchema,
  type PolicyField,
} from '../policyFields.js';
import type { AppleAppPolicy } from '../ports.js';
import { isBundleVersion, VALIDATION_CATEGORY_NAMES } from './appleDistribution.js';
import { PLATFORM_NAMES } from './keyPlatform.js';

const categoriesOrMinVersion = (a: AppleAppPolicy) =>
  Boolean(a.validationCategories?.length || a.minBundleVersion);

/**
 * The App Attest policy of an allowlisted app, rule by rule: `allowlist add apple`'s flags, their
 * parsing and `allowlist list`'s words come from this table (the order is the help's and the list's).
 */
export const APPLE_POLICY_FIELDS: readonly PolicyField<AppleAppPolicy>[] = [
  switchField(
    'requireReceipt',
    '--require-receipt',
    [
      'reject registrations whose App Attest receipt is missing or invalid (apple_receipt_invalid)',
      'accept registrations whatever their receipt (the default)',
    ],
    (a) => (a.requireReceipt ? 'receipt required' : undefined),
  ),
  {
    key: 'maxRiskMetric',
    flag: '--max-risk-metric <n>',
    help: "reject assertions from keys whose latest risk metric (Apple's count of attestations for the device and app over 30 days) is above n (apple_risk_exceeded)",
    text: textSchema((text) =>
      /^\d{1,9}$/.test(text.trim())
        ? { ok: true, value: Number(text.trim()) }
        : {
            ok: false,
            problem: `--max-risk-metric must be a whole number of attestations, got "${text}"`,
          },
    ),
    no: { help: 'stop checking the risk metric', value: null },
    stored: z.number().int().min(0).nullable(),
    summary: (a) =>
      a.maxRiskMetric !== undefined && a.maxRiskMetric !== null
        ? `risk <= ${a.maxRiskMetric}`
        : undefined,
  },
  {
    key: 'validationCategories',
    flag: '--validation-category <list>',
    help: `accepted iOS 27 distributions, comma-separated: ${VALIDATION_CATEGORY_NAMES.join(', ')} (apple_distribution_not_allowed)`,
    text: textSchema((text) => {
      const names = text
        .split(',')
        .map((n) => n.trim().toLowerCase())
        .filter(Boolean);
      return names.length > 0 && names.every((n) => VALIDATION_CATEGORY_NAMES.includes(n))
        ? { ok: true, value: [...new Set(names)] }
        : {
            ok: false,
            problem: `--validation-category takes ${VALIDATION_CATEGORY_NAMES.join(', ')}; got "${text}"`,
          };
    }),
    no: { help: 'stop checking the validation category', value: [] },
    stored: z.array(z.string().max(32)).max(16),
    summary: (a) =>
      a.validationCategories?.length ? `category ${a.validationCategories.join('|')}` : undefined,
  },
  {
    key: 'minBundleVersion',
    flag: '--min-bundle-version <v>',
    help: 'lowest accepted iOS 27 bundle version, dotted numbers (apple_distribution_not_allowed)',
    text: textSchema((text) =>
      isBundleVersion(text.trim())
        ? { ok: true, value: text.trim() }
        : {
            ok: false,
            problem: `--min-bundle-version must be 1 to 4 dotted numbers (e.g. 4.2 or 1203), got "${text}"`,
          },
    ),
    no: { help: 'stop checking the bundle version', value: null },
    stored: z.string().max(64).nullable(),
    summary: (a) => (a.minBundleVersion ? `bundle >= ${a.minBundleVersion}` : undefined),
  },
  switchField(
    'allowMissingValidationCategory',
    '--allow-missing-validation-category',
    [
      'let tokens without the iOS 27 extensions (iOS 26 and earlier) pass the two rules above',
      'refuse tokens without the iOS 27 extensions when a rule above is set (the default)',
    ],
    (a) =>
      categoriesOrMinVersion(a) && a.allowMissingValidationCategory
        ? 'missing category ok'
        : undefined,
  ),
  {
    key: 'platforms',
    flag: '--platforms <list>',
    help: `accepted platforms, comma-separated: ${Object.values(PLATFORM_NAMES).join(', ')} (default both; macOS keys carry a key access-control extension) (apple_platform_not_allowed)`,
    text: textSchema((text) => {
      const names = text
        .split(',')
        .map((n) => n.trim().toLowerCase())
        .filter(Boolean);
      const known = Object.values(PLATFORM_NAMES);
      return names.length > 0 && names.every((n) => known.includes(n))
        ? { ok: true, value: known.filter((n) => names.includes(n)) }
        : {
            ok: false,
            problem: `--platforms takes ${known.join(', ')} (comma-separated); got "${text}"`,
          };
    }),
    no: { help: 'accept keys of every platform again', value: [] },
    stored: z.array(z.enum(['ios', 'macos'])).max(2),
    summary: (a) => (a.platforms?.length ? `platform ${a.platforms.join('|')}` : undefined),
  },
  OBSERVED_RULES_FIELD,
  deviceLimitField<AppleAppPolicy>(
    'an App Attest key (its key id): its registration and every assertion count',
    (limit) => `${limit} per device`,
  ),
];
