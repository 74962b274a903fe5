/**
 * Policy on the newer verdicts (licensing, Play Protect, app access risk, recent device activity):
 * each flag passes and fails, a required verdict that is absent or UNEVALUATED is a rejection,
 * for classic tokens (verified locally) and standard ones (decoded by Google) alike.
 */

import { describe, expect, it } from 'vitest';

import {
  parseAppAccessRiskList,
  parsePlayProtectList,
} from '../../../src/core/gms/verdictPolicy.js';

import type { AndroidPackagePolicy } from '../../../src/core/ports.js';
import { randomNonce } from '../../support/googleFactory.js';
import { verdictOutcome, withReason, type VerdictEdit } from '../../support/verdictOutcome.js';

const NOW = new Date('2026-03-01T12:00:00.000Z');
const nonce = randomNonce();

type Edit = VerdictEdit;
const verify = verdictOutcome(NOW, nonce);
const outcome = async (...args: Parameters<typeof verify>) => withReason(await verify(...args));

const licensing =
  (v: string | undefined): Edit =>
  (p) =>
    void (p.accountDetails = v === undefined ? {} : { appLicensingVerdict: v });
const protect =
  (v: string | undefined): Edit =>
  (p) =>
    void (p.environmentDetails =
      v === undefined ? { appAccessRiskVerdict: { appsDetected: [] } } : { playProtectVerdict: v });
const apps =
  (v: string[] | undefined): Edit =>
  (p) =>
    void (p.environmentDetails = {
      playProtectVerdict: 'NO_ISSUES',
      appAccessRiskVerdict: v === undefined ? {} : { appsDetected: v },
    });
const activity =
  (v: string | undefined): Edit =>
  (p) =>
    void (p.deviceIntegrity.recentDeviceActivity =
      v === undefined ? {} : { deviceActivityLevel: v });

const cases: [string, Partial<AndroidPackagePolicy>, Edit, string, string][] = [
  [
    '--require-licensed, LICENSED',
    { requireLicensed: true },
    licensing('LICENSED'),
    'accepted',
    'gms.licensing',
  ],
  [
    '--require-licensed, UNLICENSED',
    { requireLicensed: true },
    licensing('UNLICENSED'),
    'gms_not_licensed',
    'gms.licensing',
  ],
  [
    '--require-licensed, UNEVALUATED',
    { requireLicensed: true },
    licensing('UNEVALUATED'),
    'gms_not_licensed',
    'gms.licensing',
  ],
  [
    '--require-licensed, absent',
    { requireLicensed: true },
    (p) => void delete p.accountDetails,
    'gms_not_licensed',
    'gms.licensing',
  ],
  [
    '--require-licensed, empty accountDetails',
    { requireLicensed: true },
    licensing(undefined),
    'gms_not_licensed',
    'gms.licensing',
  ],
  ['not required, UNLICENSED', {}, licensing('UNLICENSED'), 'accepted', 'gms.licensing'],
  [
    '--require-play-protect, NO_ISSUES',
    { playProtectVerdicts: ['NO_ISSUES'] },
    protect('NO_ISSUES'),
    'accepted',
    'gms.playProtect',
  ],
  [
    '--require-play-protect, HIGH_RISK',
    { playProtectVerdicts: ['NO_ISSUES'] },
    protect('HIGH_RISK'),
    'gms_play_protect',
    'gms.playProtect',
  ],
  [
    '--require-play-protect, NO_DATA not in the list',
    { playProtectVerdicts: ['NO_ISSUES'] },
    protect('NO_DATA'),
    'gms_play_protect',
    'gms.playProtect',
  ],
  [
    '--require-play-protect NO_ISSUES,NO_DATA, NO_DATA',
    { playProtectVerdicts: ['NO_ISSUES', 'NO_DATA'] },
    protect('NO_DATA'),
    'accepted',
    'gms.playProtect',
  ],
  [
    '--require-play-protect, UNEVALUATED',
    { playProtectVerdicts: ['NO_ISSUES'] },
    protect('UNEVALUATED'),
    'gms_play_protect',
    'gms.playProtect',
  ],
  [
    '--require-play-protect, absent',
    { playProtectVerdicts: ['NO_ISSUES'] },
    protect(undefined),
    'gms_play_protect',
    'gms.playProtect',
  ],
  [
    '--require-play-protect, no environmentDetails',
    { playProtectVerdicts: ['NO_ISSUES'] },
    (p) => void delete p.environmentDetails,
    'gms_play_protect',
    'gms.playProtect',
  ],
  [
    '--deny-app-access-risk capturing, known installed only',
    { denyAppAccessRisk: ['KNOWN_CAPTURING', 'UNKNOWN_CAPTURING'] },
    apps(['KNOWN_INSTALLED']),
    'accepted',
    'gms.appAccessRisk',
  ],
  [
    '--deny-app-access-risk capturing, nothing detected',
    { denyAppAccessRisk: ['UNKNOWN_CAPTURING'] },
    apps([]),
    'accepted',
    'gms.appAccessRisk',
  ],
  [
    '--deny-app-access-risk capturing, UNKNOWN_CAPTURING',
    { denyAppAccessRisk: ['KNOWN_CAPTURING', 'UNKNOWN_CAPTURING'] },
    apps(['KNOWN_INSTALLED', 'UNKNOWN_CAPTURING']),
    'gms_app_access_risk',
    'gms.appAccessRisk',
  ],
  [
    '--deny-app-access-risk UNKNOWN_CONTROLLING, KNOWN_CONTROLLING',
    { denyAppAccessRisk: ['UNKNOWN_CONTROLLING'] },
    apps(['KNOWN_CONTROLLING']),
    'accepted',
    'gms.appAccessRisk',
  ],
  [
    '--deny-app-access-risk, empty verdict (not evaluated)',
    { denyAppAccessRisk: ['UNKNOWN_CAPTURING'] },
    apps(undefined),
    'gms_app_access_risk',
    'gms.appAccessRisk',
  ],
  [
    '--max-device-activity LEVEL_2, LEVEL_2',
    { maxDeviceActivity: 'LEVEL_2' },
    activity('LEVEL_2'),
    'accepted',
    'gms.deviceActivity',
  ],
  [
    '--max-device-activity LEVEL_2, LEVEL_1',
    { maxDeviceActivity: 'LEVEL_2' },
    activity('LEVEL_1'),
    'accepted',
    'gms.deviceActivity',
  ],
  [
    '--max-device-activity LEVEL_2, LEVEL_3',
    { maxDeviceActivity: 'LEVEL_2' },
    activity('LEVEL_3'),
    'gms_device_activity',
    'gms.deviceActivity',
  ],
  [
    '--max-device-activity LEVEL_2, UNEVALUATED',
    { maxDeviceActivity: 'LEVEL_2' },
    activity('UNEVALUATED'),
    'gms_device_activity',
    'gms.deviceActivity',
  ],
  [
    '--max-device-activity LEVEL_2, absent',
    { maxDeviceActivity: 'LEVEL_2' },
    (p) => void delete p.deviceIntegrity.recentDeviceActivity,
    'gms_device_activity',
    'gms.deviceActivity',
  ],
];

describe.each(['classic', 'standard'] as const)('%s requests', (kind) => {
  it.each(cases)('%s', async (_name, policy, edit, expected, check) => {
    const { reason, run } = await outcome(kind, policy, edit);
    expect(reason).toBe(expected);
    const record = run.checks.find((c) => c.id === check);
    const required = Object.keys(policy).length > 0;
    expect(record?.status).toBe(expected === 'accepted' ? (required ? 'pass' : 'skip') : 'fail');
  });

  it('an absent required verdict says so in its detail and names the field in the facts', async () => {
    const { run } = await outcome(
      kind,
      { requireLicensed: true },
      (p) => void delete p.accountDetails,
    );
    expect(run.ok).toBe(false);
    expect(!run.ok && run.detail).toMatch(/absent/);
    expect(run.facts.missingVerdict).toBe('accountDetails.appLicensingVerdict');
  });

  it("all five together pass on Google's example verdict and run in order before freshness", async () => {
    const { reason, run } = await outcome(kind, {
      requireLicensed: true,
      playProtectVerdicts: ['NO_ISSUES'],
      denyAppAccessRisk: ['UNKNOWN_CAPTURING', 'UNKNOWN_CONTROLLING'],
      maxDeviceActivity: 'LEVEL_2',
      // Google's example has bits first and third set
      denyRecallBits: ['second'],
    });
    expect(reason).toBe('accepted');
    const ids = run.checks.map((c) => c.id);
    expect(ids.slice(-8)).toEqual([
      'gms.licensing',
      'gms.playProtect',
      'gms.appAccessRisk',
      'gms.deviceActivity',
      'gms.deviceRecall',
      'gms.accountActivity',
      'gms.locationSpoofing',
      'gms.freshness',
    ]);
    // the account and location rules are not set here: skipped
    expect(run.checks.slice(-8).map((c) => c.status)).toEqual([
      ...Array<string>(5).fill('pass'),
      'skip',
      'skip',
      'pass',
    ]);
  });
});

describe('flag values', () => {
  it("--require-play-protect takes Google's verdicts in any case, never UNEVALUATED", () => {
    expect(parsePlayProtectList('no_issues, NO_DATA')).toEqual({
      ok: true,
      values: ['NO_ISSUES', 'NO_DATA'],
    });
    expect(parsePlayProtectList('UNEVALUATED').ok).toBe(false);
    expect(parsePlayProtectList('fine').ok).toBe(false);
    expect(parsePlayProtectList(' , ').ok).toBe(false);
  });

  it('--deny-app-access-risk takes kinds (known and unknown) or exact values', () => {
    expect(parseAppAccessRiskList('capturing,UNKNOWN_CONTROLLING')).toEqual({
      ok: true,
      values: ['KNOWN_CAPTURING', 'UNKNOWN_CAPTURING', 'UNKNOWN_CONTROLLING'],
    });
    expect(parseAppAccessRiskList('unknown_overlays')).toEqual({
      ok: true,
      values: ['UNKNOWN_OVERLAYS'],
    });
    expect(parseAppAccessRiskList('screenreader').ok).toBe(false);
  });
});
