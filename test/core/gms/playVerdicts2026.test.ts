/**
 * Play's 2026 verdicts in the verifier: accountDetails.accountActivity,
 * environmentDetails.locationSpoofingRiskVerdict and deviceIntegrity.legacyDeviceRecognitionVerdict
 * parsed, bounded and shown (unknown values kept as data); the account activity and location
 * spoofing rules pass and fail (absent or UNEVALUATED is a rejection); and the Play remediation
 * dialog each failed rule names, for classic and standard tokens alike.
 */

import { describe, expect, it } from 'vitest';
import {
  parseAccountActivityLevel,
  parseVerdictValues,
} from '../../../src/core/gms/accountLocationPolicy.js';

import { REMEDIATION_DIALOGS } from '../../../src/core/gms/remediation.js';

import type { AndroidPackagePolicy } from '../../../src/core/ports.js';
import { randomNonce } from '../../support/googleFactory.js';
import { type StandardPayload } from '../../support/standardPayload.js';
import { verdictOutcome, type VerdictEdit } from '../../support/verdictOutcome.js';

const NOW = new Date('2026-11-01T12:00:00.000Z');
const nonce = randomNonce();

type Edit = VerdictEdit;
const outcome = verdictOutcome(NOW, nonce);

const account =
  (level: unknown): Edit =>
  (p) =>
    void (p.accountDetails = {
      appLicensingVerdict: 'LICENSED',
      ...(level === undefined ? {} : { accountActivity: { activityLevel: level } }),
    });
const spoofing =
  (verdict: unknown): Edit =>
  (p) =>
    void (p.environmentDetails = {
      playProtectVerdict: 'NO_ISSUES',
      ...(verdict === undefined ? {} : { locationSpoofingRiskVerdict: verdict }),
    });
const legacy =
  (verdict: unknown): Edit =>
  (p) =>
    void (p.deviceIntegrity.legacyDeviceRecognitionVerdict = verdict);

describe.each(['classic', 'standard'] as const)('%s tokens', (kind) => {
  it('the three new fields are shown in googleTokenDetails, unknown values as they came', async () => {
    const run = await outcome(kind, {}, (p) => {
      account('SOME_LEVEL_GOOGLE_ADDS')(p);
      spoofing(['NEW_RISK_KIND'])(p);
      legacy(['MEETS_BASIC_INTEGRITY', 'MEETS_DEVICE_INTEGRITY'])(p);
    });
    expect(run.ok).toBe(true);
    if (!run.ok) return;
    expect(run.details).toMatchObject({
      googleTokenDetails: {
        accountActivityLevel: 'SOME_LEVEL_GOOGLE_ADDS',
        locationSpoofingRiskVerdict: ['NEW_RISK_KIND'],
        legacyDeviceIntegrityVerdicts: ['MEETS_BASIC_INTEGRITY', 'MEETS_DEVICE_INTEGRITY'],
      },
    });
  });

  it('a verdict without them shows none of them', async () => {
    const run = await outcome(kind, {});
    expect(run.ok).toBe(true);
    if (!run.ok) return;
    const details = (run.details as unknown as { googleTokenDetails: Record<string, unknown> })
      .googleTokenDetails;
    expect(details).not.toHaveProperty('accountActivityLevel');
    expect(details).not.toHaveProperty('locationSpoofingRiskVerdict');
    expect(details).not.toHaveProperty('legacyDeviceIntegrityVerdicts');
  });

  it.each([
    ['an account activity level that is not text', account(3)],
    ['an account activity level of 65 characters', account('A'.repeat(65))],
    ['an empty account activity level', account('')],
    [
      'accountActivity that is a list',
      (p: StandardPayload) => void (p.accountDetails = { accountActivity: [] }),
    ],
    ['17 location spoofing values', spoofing(Array.from({ length: 17 }, (_, i) => `RISK_${i}`))],
    ['a location spoofing verdict that is an object', spoofing({ risk: 'HIGH' })],
    ['a location spoofing value that is not text', spoofing([1])],
    ['a legacy verdict that is text, not a list', legacy('MEETS_DEVICE_INTEGRITY')],
    ['a legacy verdict value of 65 characters', legacy(['M'.repeat(65)])],
  ] as [string, Edit][])('%s is gms_payload_malformed, never a fault', async (_, edit) => {
    const run = await outcome(kind, {}, edit);
    expect(run.ok ? 'accepted' : run.reason).toBe('gms_payload_malformed');
  });

  it('a lone location spoofing value is read as a list of one', async () => {
    const run = await outcome(kind, {}, spoofing('ONE_VALUE'));
    expect(run.ok && run.details).toMatchObject({
      googleTokenDetails: { locationSpoofingRiskVerdict: ['ONE_VALUE'] },
    });
  });

  describe('--min-account-activity', () => {
    const min = { minAccountActivity: 'TYPICAL_BASIC' } as const;
    it.each([
      ['TYPICAL_BASIC', 'accepted'],
      ['TYPICAL_STRONG', 'accepted'],
      ['UNKNOWN', 'gms_account_activity'],
      ['UNUSUAL', 'gms_account_activity'],
      ['UNEVALUATED', 'gms_account_activity'],
      ['A_LEVEL_GOOGLE_ADDS', 'gms_account_activity'],
      [undefined, 'gms_account_activity'],
    ])('%s: %s', async (level, expected) => {
      const run = await outcome(kind, min, account(level));
      expect(run.ok ? 'accepted' : run.reason).toBe(expected);
      const check = run.checks.find((c) => c.id === 'gms.accountActivity');
      expect(check?.status).toBe(expected === 'accepted' ? 'pass' : 'fail');
      // a verdict Google did not give names the missing field (the "not opted in" hint)
      if (level === undefined || level === 'UNEVALUATED')
        expect(run.facts.missingVerdict).toBe('accountDetails.accountActivity.activityLevel');
      else expect(run.facts.missingVerdict).toBeUndefined();
    });

    it('not set: the check is skipped whatever the level', async () => {
      const run = await outcome(kind, {}, account('UNUSUAL'));
      expect(run.ok).toBe(true);
      expect(run.checks.find((c) => c.id === 'gms.accountActivity')?.status).toBe('skip');
    });

    it('observed: an UNUSUAL account passes and is recorded', async () => {
      const run = await outcome(
        kind,
        { ...min, observe: ['gms_account_activity'] },
        account('UNUSUAL'),
      );
      expect(run.ok).toBe(true);
      expect(run.checks.find((c) => c.id === 'gms.accountActivity')?.status).toBe('observed');
    });
  });

  describe('--deny-location-spoofing', () => {
    const deny = { denyLocationSpoofing: ['HIGH_RISK_DEVICE', 'A_FUTURE_RISK'] };
    it.each([
      [[], 'accepted'],
      [['LOW_RISK_DEVICE'], 'accepted'],
      [['LOW_RISK_DEVICE', 'HIGH_RISK_DEVICE'], 'gms_location_spoofing'],
      [['A_FUTURE_RISK'], 'gms_location_spoofing'],
      [['UNEVALUATED'], 'gms_location_spoofing'],
      [undefined, 'gms_location_spoofing'],
    ])('%j: %s', async (verdict, expected) => {
      const run = await outcome(kind, deny, spoofing(verdict));
      expect(run.ok ? 'accepted' : run.reason).toBe(expected);
      expect(run.checks.find((c) => c.id === 'gms.locationSpoofing')?.status).toBe(
        expected === 'accepted' ? 'pass' : 'fail',
      );
    });
  });

  describe('the remediation dialog of a rejection', () => {
    const dialog = (name: keyof typeof REMEDIATION_DIALOGS) => ({
      dialog: name,
      typeCode: REMEDIATION_DIALOGS[name],
    });
    it.each([
      [
        'device integrity below DEVICE',
        {},
        (p: StandardPayload) =>
          void (p.deviceIntegrity.deviceRecognitionVerdict = ['MEETS_BASIC_INTEGRITY']),
        'gms_integrity_insufficient',
        dialog('GET_INTEGRITY'),
      ],
      [
        'device integrity below STRONG',
        { minVerdict: 'MEETS_STRONG_INTEGRITY' },
        undefined,
        'gms_integrity_insufficient',
        dialog('GET_STRONG_INTEGRITY'),
      ],
      [
        'an unrecognized app',
        {},
        (p: StandardPayload) =>
          void (p.appIntegrity.appRecognitionVerdict = 'UNRECOGNIZED_VERSION'),
        'gms_app_not_recognized',
        dialog('GET_INTEGRITY'),
      ],
      [
        'UNLICENSED',
        { requireLicensed: true },
        (p: StandardPayload) => void (p.accountDetails = { appLicensingVerdict: 'UNLICENSED' }),
        'gms_not_licensed',
        dialog('GET_LICENSED'),
      ],
      [
        'licensing UNEVALUATED (no dialog licenses an unevaluated verdict)',
        { requireLicensed: true },
        (p: StandardPayload) => void (p.accountDetails = { appLicensingVerdict: 'UNEVALUATED' }),
        'gms_not_licensed',
        undefined,
      ],
      [
        'an unknown app capturing the screen',
        { denyAppAccessRisk: ['UNKNOWN_CAPTURING'] },
        (p: StandardPayload) =>
          void (p.environmentDetails = {
            appAccessRiskVerdict: { appsDetected: ['KNOWN_INSTALLED', 'UNKNOWN_CAPTURING'] },
          }),
        'gms_app_access_risk',
        dialog('CLOSE_UNKNOWN_ACCESS_RISK'),
      ],
      [
        'a known app controlling the device',
        { denyAppAccessRisk: ['KNOWN_CONTROLLING', 'UNKNOWN_CAPTURING'] },
        (p: StandardPayload) =>
          void (p.environmentDetails = {
            appAccessRiskVerdict: { appsDetected: ['KNOWN_CONTROLLING', 'UNKNOWN_CAPTURING'] },
          }),
        'gms_app_access_risk',
        dialog('CLOSE_ALL_ACCESS_RISK'),
      ],
      [
        'an overlay (no dialog closes overlays)',
        { denyAppAccessRisk: ['UNKNOWN_OVERLAYS'] },
        (p: StandardPayload) =>
          void (p.environmentDetails = {
            appAccessRiskVerdict: { appsDetected: ['UNKNOWN_OVERLAYS'] },
          }),
        'gms_app_access_risk',
        undefined,
      ],
      [
        'account activity (the user cannot fix it on the device)',
        { minAccountActivity: 'TYPICAL_STRONG' },
        account('TYPICAL_BASIC'),
        'gms_account_activity',
        undefined,
      ],
    ] as [string, Partial<AndroidPackagePolicy>, Edit | undefined, string, unknown][])(
      '%s: %s',
      async (_, policy, edit, reason, remediation) => {
        const run = await outcome(kind, policy, edit);
        expect(run.ok ? 'accepted' : run.reason).toBe(reason);
        expect(run.facts.remediation).toEqual(remediation);
      },
    );

    it('an observed failure leaves no dialog behind for a later enforced one', async () => {
      const run = await outcome(
        kind,
        {
          minVerdict: 'MEETS_STRONG_INTEGRITY',
          minAccountActivity: 'TYPICAL_STRONG',
          observe: ['gms_integrity_insufficient'],
        },
        account('TYPICAL_BASIC'),
      );
      expect(run.ok ? 'accepted' : run.reason).toBe('gms_account_activity');
      expect(run.facts.remediation).toBeUndefined();
    });
  });
});

describe('operator text', () => {
  it.each([
    ['typical_basic', 'TYPICAL_BASIC'],
    [' Typical-Strong ', 'TYPICAL_STRONG'],
    ['unusual', 'UNUSUAL'],
  ])('--min-account-activity %j is %s', (text, level) => {
    expect(parseAccountActivityLevel(text)).toEqual({ ok: true, value: level });
  });

  it.each(['UNEVALUATED', 'typical', '', 'LEVEL_1'])(
    '--min-account-activity %j is refused',
    (text) => {
      const parsed = parseAccountActivityLevel(text);
      expect(parsed.ok).toBe(false);
      if (!parsed.ok) expect(parsed.problem).toContain('TYPICAL_BASIC');
    },
  );

  it('location spoofing values: any case, repeats once, unknown names kept', () => {
    expect(parseVerdictValues('high_risk_device, SOMETHING_NEW,High_Risk_Device', 'x')).toEqual({
      ok: true,
      values: ['HIGH_RISK_DEVICE', 'SOMETHING_NEW'],
    });
  });

  it.each([
    ',',
    'HIGH RISK',
    '1ST',
    'A'.repeat(65),
    Array.from({ length: 17 }, (_, i) => `V${i}`).join(','),
  ])('location spoofing values %j are refused', (text) => {
    expect(parseVerdictValues(text, 'location spoofing risk').ok).toBe(false);
  });
});

describe('hostile values in the new structures', () => {
  /** A small deterministic generator of JSON values of every type, nested a little. */
  function* values(seed: number): Generator<unknown> {
    let x = seed;
    const next = () => (x = (x * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const value = (depth: number): unknown => {
      // deep down only leaves: the values stay small
      const pick = Math.floor(next() * (depth > 2 ? 5 : 9));
      if (pick === 0) return null;
      if (pick === 1) return next() < 0.5;
      if (pick === 2) return Math.floor(next() * 1e6) - 5e5;
      if (pick === 3) return 'A'.repeat(Math.floor(next() * 80));
      if (pick === 4)
        return ['TYPICAL_BASIC', 'UNEVALUATED', '', 'ü\u0000x', 'HIGH_RISK_DEVICE'][
          Math.floor(next() * 5)
        ];
      if (pick === 5)
        return Array.from({ length: Math.floor(next() * 20) }, () => value(depth + 1));
      if (pick === 6) return { activityLevel: value(depth + 1) };
      return { [['activityLevel', 'x', '__proto__'][Math.floor(next() * 3)]!]: value(depth + 1) };
    };
    for (;;) yield value(0);
  }

  it('300 random values: every outcome is accepted or a reason code, never a fault', async () => {
    const policy = {
      minAccountActivity: 'UNKNOWN',
      denyLocationSpoofing: ['HIGH_RISK_DEVICE'],
    } as const;
    const seen = new Set<string>();
    const gen = values(39);
    for (let i = 0; i < 300; i++) {
      // one field hostile at a time, the others valid: every path is reachable
      const hostile = gen.next().value;
      const field = i % 3;
      const run = await outcome('standard', policy, (p) => {
        p.accountDetails = {
          appLicensingVerdict: 'LICENSED',
          accountActivity: field === 0 ? hostile : { activityLevel: 'TYPICAL_BASIC' },
        };
        p.environmentDetails = { locationSpoofingRiskVerdict: field === 1 ? hostile : [] };
        p.deviceIntegrity.legacyDeviceRecognitionVerdict = field === 2 ? hostile : [];
      });
      seen.add(run.ok ? 'accepted' : run.reason);
    }
    expect(
      [...seen].every((r) =>
        [
          'accepted',
          'gms_payload_malformed',
          'gms_account_activity',
          'gms_location_spoofing',
        ].includes(r),
      ),
    ).toBe(true);
    // the generator reaches the malformed and the rule paths alike
    expect(seen.has('gms_payload_malformed')).toBe(true);
    expect(seen.has('gms_account_activity')).toBe(true);
  });
});
