/**
 * The policy tables name the entry columns their rules are stored in (a rule's key in snake
 * case): each such column must exist in the schema, and a rule is written only when given.
 */
import { getTableConfig } from 'drizzle-orm/pg-core';
import { expect, it } from 'vitest';
import { appleRuleColumns } from '../../src/db/appleAppRows.js';
import { tableRuleColumns } from '../../src/db/androidPackageRows.js';
import { ANDROID_RULES, ruleValuesOf } from '../../src/db/policyColumns.js';
import { androidPackages, appleApps } from '../../src/db/schema.js';

const columnsOf = (table: typeof appleApps | typeof androidPackages) =>
  getTableConfig(table).columns.map((c) => c.name);

it('every table rule is a column of its entry table', () => {
  const apple = appleRuleColumns({}).map((r) => r.column);
  expect(apple).toEqual([
    'require_receipt',
    'max_risk_metric',
    'validation_categories',
    'min_bundle_version',
    'allow_missing_validation_category',
    'platforms',
  ]);
  expect(columnsOf(appleApps)).toEqual(expect.arrayContaining(apple));
  const android = tableRuleColumns({}).map((r) => r.column);
  expect(android).toContain('deny_recall_bits');
  expect(android).toContain('max_patch_age_months');
  expect(columnsOf(androidPackages)).toEqual(expect.arrayContaining(android));
});

it('a rule counts as given only when the policy sets it (null and [] included)', () => {
  const given = (p: object) =>
    appleRuleColumns(p)
      .filter((r) => r.given)
      .map((r) => r.column);
  expect(given({})).toEqual([]);
  expect(given({ maxRiskMetric: null, validationCategories: [] })).toEqual([
    'max_risk_metric',
    'validation_categories',
  ]);
});

it('a row reads back through the table: text arrays in either driver form, hex boot keys as bytes, values this version does not know dropped', () => {
  const key = 'ab'.repeat(32);
  const read = ruleValuesOf(ANDROID_RULES, {
    require_licensed: true,
    // PGlite may hand a text[] over as its literal, postgres.js as an array
    play_protect_verdicts: '{NO_ISSUES,NO_DATA}',
    deny_app_access_risk: ['KNOWN_CAPTURING'],
    max_device_activity: null,
    deny_recall_bits: ['third', 'fourth', 'first'],
    min_account_activity: 'TYPICAL_BASIC',
    // a value this version has not seen is kept: Google adds location spoofing values
    deny_location_spoofing: '{HIGH_RISK_DEVICE,A_FUTURE_RISK}',
    key_attestation: true,
    min_security_level: 'SomethingNewer',
    allow_unlocked: false,
    boot_keys: [key],
    max_patch_age_months: 12n,
  });
  expect(read).toEqual({
    requireLicensed: true,
    playProtectVerdicts: ['NO_ISSUES', 'NO_DATA'],
    denyAppAccessRisk: ['KNOWN_CAPTURING'],
    maxDeviceActivity: null,
    denyRecallBits: ['first', 'third'],
    minAccountActivity: 'TYPICAL_BASIC',
    denyLocationSpoofing: ['HIGH_RISK_DEVICE', 'A_FUTURE_RISK'],
    keyAttestation: true,
    minSecurityLevel: 'TrustedEnvironment',
    allowUnlocked: false,
    bootKeys: [new Uint8Array(Buffer.from(key, 'hex'))],
    maxPatchAgeMonths: 12,
    maxKeysPerIssuer: null,
  });
});
