import { z } from 'zod';
import { switchField, textSchema, type PolicyField } from '../policyFields.js';
import type { AccountActivityLevel, DeviceActivityLevel } from '../ports.js';
import {
  ACCOUNT_ACTIVITY_LEVELS,
  isAccountActivityLevel,
  MAX_VERDICT_VALUES,
  parseAccountActivityLevel,
  parseVerdictValues,
  VERDICT_VALUE,
} from './accountLocationPolicy.js';
import {
  isDeviceActivityLevel,
  parseAppAccessRiskList,
  parsePlayProtectList,
  parseRecallBitList,
  RECALL_BITS,
} from './verdictPolicy.js';

/** A package's newer-verdict rules as `allowlist list` reads them. */
export interface GmsVerdictRules {
  requireLicensed: boolean;
  playProtectVerdicts: readonly string[];
  denyAppAccessRisk: readonly string[];
  maxDeviceActivity: string | null;
  denyRecallBits: readonly string[];
  minAccountActivity: string | null;
  denyLocationSpoofing: readonly string[];
}

/**
 * A rule holding a list of verdict values: `--no-` empties it (not checked); the list shows as
 * `label a|b`.
 */
function verdictListField(
  key: 'playProtectVerdicts' | 'denyAppAccessRisk' | 'denyRecallBits' | 'denyLocationSpoofing',
  flag: string,
  [help, noHelp]: readonly [string, string],
  parse: (text: string) => { ok: true; values: unknown } | { ok: false; problem: string },
  label: string,
  stored: z.ZodType,
  /** the values this version knows: a stored one it does not is dropped, never read as another */
  known?: readonly string[],
): PolicyField<GmsVerdictRules> {
  const name = flag.split(' ')[0]!;
  return {
    key,
    flag,
    help,
    text: textSchema((text) => {
      const parsed = parse(text);
      return parsed.ok
        ? { ok: true, value: parsed.values }
        : { ok: false, problem: `${name}: ${parsed.problem}` };
    }),
    no: { help: noHelp, value: [] },
    stored,
    summary: (p) => (p[key].length ? `${label} ${p[key].join('|')}` : undefined),
    ...(known ? { read: (v) => known.filter((k) => (v as readonly string[]).includes(k)) } : {}),
  };
}

/**
 * The Play Integrity newer-verdict rules of an Android package (classic and standard requests
 * alike): `allowlist add android`'s flags for them, their parsing and `allowlist list`'s words.
 */
export const GMS_VERDICT_FIELDS: readonly PolicyField<GmsVerdictRules>[] = [
  switchField(
    'requireLicensed',
    '--require-licensed',
    ['require accountDetails.appLicensingVerdict LICENSED', 'stop requiring it'],
    (p) => (p.requireLicensed ? 'licensed' : undefined),
  ),
  {
    ...verdictListField(
      'playProtectVerdicts',
      '--require-play-protect [verdicts]',
      [
        'require environmentDetails.playProtectVerdict NO_ISSUES, or one of these (comma-separated)',
        'stop checking the Play Protect verdict',
      ],
      parsePlayProtectList,
      'play protect',
      z.array(z.string().max(64)).max(16),
    ),
    bare: ['NO_ISSUES'],
  },
  verdictListField(
    'denyAppAccessRisk',
    '--deny-app-access-risk <risks>',
    [
      'reject these appsDetected: capturing,controlling,overlays,installed (both known and unknown apps) or exact values such as UNKNOWN_CAPTURING',
      'stop checking app-access risk',
    ],
    parseAppAccessRiskList,
    'deny',
    z.array(z.string().max(64)).max(16),
  ),
  {
    key: 'maxDeviceActivity',
    flag: '--max-device-activity <level>',
    help: 'highest accepted recentDeviceActivity level, LEVEL_1 to LEVEL_4',
    text: textSchema<DeviceActivityLevel>((text) => {
      const upper = text.trim().toUpperCase();
      const level = /^\d$/.test(upper) ? `LEVEL_${upper}` : upper;
      return isDeviceActivityLevel(level)
        ? { ok: true, value: level }
        : { ok: false, problem: `--max-device-activity must be LEVEL_1 to LEVEL_4, got "${text}"` };
    }),
    no: { help: 'stop checking recent device activity', value: null },
    stored: z
      .custom<DeviceActivityLevel>(isDeviceActivityLevel, 'expected LEVEL_1 to LEVEL_4')
      .nullable(),
    summary: (p) => (p.maxDeviceActivity ? `activity <= ${p.maxDeviceActivity}` : undefined),
  },
  verdictListField(
    'denyRecallBits',
    '--deny-recall-bits <bits>',
    [
      'reject tokens whose Play device recall has any of these bits set: first,second,third (bits your backend wrote with POST /api/v1/android/device-recall)',
      'stop checking device recall bits',
    ],
    parseRecallBitList,
    'deny recall',
    z.array(z.enum(RECALL_BITS as ['first', 'second', 'third'])).max(3),
    RECALL_BITS,
  ),
  {
    key: 'minAccountActivity',
    flag: '--min-account-activity <level>',
    help: `lowest accepted accountDetails.accountActivity.activityLevel: ${ACCOUNT_ACTIVITY_LEVELS.join(', ')} (least trusted first)`,
    text: textSchema<AccountActivityLevel>((text) => {
      const parsed = parseAccountActivityLevel(text);
      return parsed.ok
        ? parsed
        : { ok: false, problem: `--min-account-activity: ${parsed.problem}` };
    }),
    no: { help: 'stop checking account activity', value: null },
    stored: z
      .custom<AccountActivityLevel>(isAccountActivityLevel, 'expected an account activity level')
      .nullable(),
    summary: (p) => (p.minAccountActivity ? `account >= ${p.minAccountActivity}` : undefined),
  },
  verdictListField(
    'denyLocationSpoofing',
    '--deny-location-spoofing <values>',
    [
      'reject tokens whose environmentDetails.locationSpoofingRiskVerdict holds any of these values (comma-separated, as Google names them)',
      'stop checking the location spoofing risk',
    ],
    (text) => parseVerdictValues(text, 'location spoofing risk'),
    'deny location',
    z.array(z.string().regex(VERDICT_VALUE)).max(MAX_VERDICT_VALUES),
  ),
];
