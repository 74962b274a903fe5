/**
 * The allowlist operations' policy input is built from the kinds' policy tables: each rule's
 * stored value is accepted within its bounds, anything else (out of bounds, unknown keys) is not.
 */
import { expect, it } from 'vitest';
import { ALLOWLIST_OPERATIONS } from '../../src/admin/allowlistOperations.js';

const apple = (policy: object) =>
  ALLOWLIST_OPERATIONS['allowlist.addApple'].input.safeParse({
    appId: 'ABCDE12345.com.example.bank',
    policy,
  }).success;
const android = (policy: object) =>
  ALLOWLIST_OPERATIONS['allowlist.addAndroid'].input.safeParse({
    packageName: 'com.example.bank',
    pair: null,
    withoutKeys: true,
    policy,
  }).success;

it('apple: the table rules with their stored values, null where --no- clears them', () => {
  expect(
    apple({
      requireReceipt: true,
      maxRiskMetric: 5,
      validationCategories: ['appstore'],
      minBundleVersion: null,
      allowMissingValidationCategory: false,
      maxVerifiesPerDevice: { max: 100, periodSeconds: 3600 },
      observeChange: { observe: ['apple_risk_exceeded'] },
    }),
  ).toBe(true);
  expect(apple({ maxRiskMetric: null, maxVerifiesPerDevice: null })).toBe(true);
  expect(apple({ maxRiskMetric: -1 })).toBe(false);
  expect(apple({ requireReceipt: 'yes' })).toBe(false);
  expect(apple({ maxVerifiesPerDevice: { max: 100, periodSeconds: 10 } })).toBe(false);
  expect(apple({ requireLicensed: true })).toBe(false);
});

it('android: the gms and android-key rules beside the key companions', () => {
  expect(
    android({
      minVerdict: 'MEETS_STRONG_INTEGRITY',
      requireLicensed: true,
      playProtectVerdicts: ['NO_ISSUES'],
      denyRecallBits: ['first'],
      maxDeviceActivity: 'LEVEL_2',
      keyAttestation: true,
      minSecurityLevel: 'StrongBox',
      bootKeys: [new Uint8Array(32)],
      maxPatchAgeMonths: 12,
      maxVerifiesPerDevice: { max: 1000, periodSeconds: 86_400 },
    }),
  ).toBe(true);
  expect(android({ maxDeviceActivity: null, maxPatchAgeMonths: null })).toBe(true);
  expect(android({ denyRecallBits: ['fourth'] })).toBe(false);
  expect(android({ maxDeviceActivity: 'LEVEL_9' })).toBe(false);
  expect(android({ bootKeys: [new Uint8Array(31)] })).toBe(false);
  expect(android({ maxPatchAgeMonths: 241 })).toBe(false);
  expect(android({ requireReceipt: true })).toBe(false);
});
