import { textSchema, type Parsed, type PolicyField } from '../policyFields.js';
import type { DeviceActivityLevel } from '../types.js';
import {
  isDeviceActivityLevel,
  parseAppAccessRiskList,
  parsePlayProtectList,
  parseRecallBitList,
} from './verdictPolicy.js';

/** A package's newer-verdict rules as `allowlist list` reads them. */
export interface GmsVerdictRules {
  requireLicensed: boolean;
  playProtectVerdicts: readonly string[];
  denyAppAccessRisk: readonly string[];
  maxDeviceActivity: string | null;
  denyRecallBits: readonly string[];
}

/** A list parser's answer with the flag before its problem. */
const listOf =
  (
    flag: string,
    parse: (text: string) => { ok: true; values: unknown } | { ok: false; problem: string },
  ) =>
  (text: string): Parsed<unknown> => {
    const parsed = parse(text);
    return parsed.ok
      ? { ok: true, value: parsed.values }
      : { ok: false, problem: `${flag}: ${parsed.problem}` };
  };

/**
 * The Play Integrity newer-verdict rules of an Android package (classic and standard requests
 * alike): `allowlist add android`'s flags for them, their parsing and `allowlist list`'s words.
 */
export const GMS_VERDICT_FIELDS: readonly PolicyField<GmsVerdictRules>[] = [
  {
    key: 'requireLicensed',
    flag: '--require-licensed',
    help: 'require accountDetails.appLicensingVerdict LICENSED',
    bare: true,
    no: { help: 'stop requiring it', value: false },
    summary: (p) => (p.requireLicensed ? 'licensed' : undefined),
  },
  {
    key: 'playProtectVerdicts',
    flag: '--require-play-protect [verdicts]',
    help: 'require environmentDetails.playProtectVerdict NO_ISSUES, or one of these (comma-separated)',
    bare: ['NO_ISSUES'],
    text: textSchema(listOf('--require-play-protect', parsePlayProtectList)),
    no: { help: 'stop checking the Play Protect verdict', value: [] },
    summary: (p) =>
      p.playProtectVerdicts.length ? `play protect ${p.playProtectVerdicts.join('|')}` : undefined,
  },
  {
    key: 'denyAppAccessRisk',
    flag: '--deny-app-access-risk <risks>',
    help: 'reject these appsDetected: capturing,controlling,overlays,installed (both known and unknown apps) or exact values such as UNKNOWN_CAPTURING',
    text: textSchema(listOf('--deny-app-access-risk', parseAppAccessRiskList)),
    no: { help: 'stop checking app-access risk', value: [] },
    summary: (p) =>
      p.denyAppAccessRisk.length ? `deny ${p.denyAppAccessRisk.join('|')}` : undefined,
  },
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
    summary: (p) => (p.maxDeviceActivity ? `activity <= ${p.maxDeviceActivity}` : undefined),
  },
  {
    key: 'denyRecallBits',
    flag: '--deny-recall-bits <bits>',
    help: 'reject tokens whose Play device recall has any of these bits set: first,second,third (bits your backend wrote with POST /api/v1/android/device-recall)',
    text: textSchema(listOf('--deny-recall-bits', parseRecallBitList)),
    no: { help: 'stop checking device recall bits', value: [] },
    summary: (p) =>
      p.denyRecallBits.length ? `deny recall ${p.denyRecallBits.join('|')}` : undefined,
  },
];
