import type { AndroidPackagePolicy, DeviceActivityLevel } from '../ports.js';
import type { RecallBit } from './gmsTokenDetails.js';
import { checkAccountActivity, checkLocationSpoofing } from './accountLocationPolicy.js';
import type { PlayIntegrityPayload } from './playIntegrityPayload.js';
import { quote } from './quote.js';
import { absent, notRequired, splitList, type VerdictResult } from './verdictResult.js';

/** `environmentDetails.playProtectVerdict` values Google documents, safest first. */
export const PLAY_PROTECT_VERDICTS = [
  'NO_ISSUES',
  'NO_DATA',
  'POSSIBLE_RISK',
  'MEDIUM_RISK',
  'HIGH_RISK',
] as const;

/** The kinds of app-access risk Google reports, each for known (Play or system) and unknown apps. */
export const APP_ACCESS_RISK_KINDS = ['installed', 'capturing', 'controlling', 'overlays'] as const;

/** Every `appAccessRiskVerdict.appsDetected` value Google documents. */
export const APP_ACCESS_RISK_VALUES: readonly string[] = APP_ACCESS_RISK_KINDS.flatMap((k) => [
  `KNOWN_${k.toUpperCase()}`,
  `UNKNOWN_${k.toUpperCase()}`,
]);

/** `recentDeviceActivity.deviceActivityLevel`, fewest integrity requests first. */
export const DEVICE_ACTIVITY_LEVELS: readonly DeviceActivityLevel[] = [
  'LEVEL_1',
  'LEVEL_2',
  'LEVEL_3',
  'LEVEL_4',
];

/** The three Play device recall bits, in Google's order, with the verdict field of each. */
export const RECALL_BITS: readonly RecallBit[] = ['first', 'second', 'third'];
export const RECALL_BIT_FIELDS = {
  first: 'bitFirst',
  second: 'bitSecond',
  third: 'bitThird',
} as const satisfies Record<RecallBit, string>;

/**
 * Parses `--deny-recall-bits` and `dev mint gms --recall`: a comma-separated list of `first`,
 * `second`, `third` (any case; Google's `bitFirst` spelling too).
 * @returns the bits in Google's order, or a one-line problem
 */
export function parseRecallBitList(
  text: string,
): { ok: true; values: RecallBit[] } | { ok: false; problem: string } {
  const items = splitList(text);
  if (items.length === 0) return { ok: false, problem: 'expected at least one recall bit' };
  const out = new Set<RecallBit>();
  for (const item of items) {
    const lower = item.toLowerCase().replace(/^bit/, '');
    const bit = RECALL_BITS.find((b) => b === lower);
    if (!bit) return { ok: false, problem: `"${item}" is not one of ${RECALL_BITS.join(', ')}` };
    out.add(bit);
  }
  return { ok: true, values: RECALL_BITS.filter((b) => out.has(b)) };
}

/** Whether `value` is a list of recall bit names (a stored policy). */
export function isRecallBitList(value: unknown): value is RecallBit[] {
  return (
    Array.isArray(value) && value.every((v) => (RECALL_BITS as readonly unknown[]).includes(v))
  );
}

/**
 * Parses `--require-play-protect` values: a comma-separated list of verdicts (any case). UNEVALUATED
 * is refused: a verdict Google did not evaluate is never a pass.
 * @returns the verdicts, or a one-line problem
 */
export function parsePlayProtectList(
  text: string,
): { ok: true; values: string[] } | { ok: false; problem: string } {
  const values = splitList(text).map((v) => v.toUpperCase());
  if (values.length === 0)
    return { ok: false, problem: 'expected at least one Play Protect verdict' };
  for (const v of values) {
    if (!(PLAY_PROTECT_VERDICTS as readonly string[]).includes(v))
      return { ok: false, problem: `"${v}" is not one of ${PLAY_PROTECT_VERDICTS.join(', ')}` };
  }
  return { ok: true, values: [...new Set(values)] };
}

/**
 * Parses `--deny-app-access-risk`: Google's values (`UNKNOWN_CAPTURING`, any case), or a kind
 * alone (`capturing`), which denies both the known and the unknown form.
 * @returns the exact `appsDetected` values to deny, or a one-line problem
 */
export function parseAppAccessRiskList(
  text: string,
): { ok: true; values: string[] } | { ok: false; problem: string } {
  const out = new Set<string>();
  const items = splitList(text);
  if (items.length === 0) return { ok: false, problem: 'expected at least one app-access risk' };
  for (const item of items) {
    const upper = item.toUpperCase();
    if (APP_ACCESS_RISK_VALUES.includes(upper)) out.add(upper);
    else if ((APP_ACCESS_RISK_KINDS as readonly string[]).includes(item.toLowerCase())) {
      out.add(`KNOWN_${upper}`);
      out.add(`UNKNOWN_${upper}`);
    } else
      return {
        ok: false,
        problem: `"${item}" is not one of ${APP_ACCESS_RISK_KINDS.join(', ')} or ${APP_ACCESS_RISK_VALUES.join(', ')}`,
      };
  }
  return { ok: true, values: APP_ACCESS_RISK_VALUES.filter((v) => out.has(v)) };
}

/** Whether `value` names a device activity level (`LEVEL_1`..`LEVEL_4`). */
export function isDeviceActivityLevel(value: unknown): value is DeviceActivityLevel {
  return typeof value === 'string' && (DEVICE_ACTIVITY_LEVELS as readonly string[]).includes(value);
}

/**
 * Runs the newer-verdict checks of a package policy over a parsed payload, in order.
 * A check the policy does not require passes as not required; a required verdict that is absent
 * or UNEVALUATED is a rejection, never a pass.
 * @param payload the parsed verdict
 * @param policy the package entry
 */
export function checkNewerVerdicts(
  payload: PlayIntegrityPayload,
  policy: AndroidPackagePolicy,
): VerdictResult[] {
  return [
    licensing(payload, policy),
    playProtect(payload, policy),
    appAccessRisk(payload, policy),
    deviceActivity(payload, policy),
    checkDeviceRecall(payload, policy),
    checkAccountActivity(payload, policy),
    checkLocationSpoofing(payload, policy),
  ];
}

function licensing(payload: PlayIntegrityPayload, policy: AndroidPackagePolicy): VerdictResult {
  const check = 'gms.licensing';
  if (!policy.requireLicensed) return notRequired(check);
  const verdict = payload.accountDetails?.appLicensingVerdict;
  if (verdict === undefined || verdict === 'UNEVALUATED') {
    return {
      ok: false,
      check,
      reason: 'gms_not_licensed',
      detail: absent('accountDetails.appLicensingVerdict', verdict, 'licensing responses'),
      missing: 'accountDetails.appLicensingVerdict',
    };
  }
  if (verdict !== 'LICENSED')
    return {
      ok: false,
      check,
      reason: 'gms_not_licensed',
      detail: `app licensing verdict is ${quote(verdict)}, not LICENSED`,
    };
  return { ok: true, check, required: true, detail: 'app licensing verdict is LICENSED' };
}

function playProtect(payload: PlayIntegrityPayload, policy: AndroidPackagePolicy): VerdictResult {
  const check = 'gms.playProtect';
  const accepted = policy.playProtectVerdicts ?? [];
  if (accepted.length === 0) return notRequired(check);
  const verdict = payload.environmentDetails?.playProtectVerdict;
  if (verdict === undefined || verdict === 'UNEVALUATED') {
    return {
      ok: false,
      check,
      reason: 'gms_play_protect',
      detail: absent('environmentDetails.playProtectVerdict', verdict, 'the Play Protect verdict'),
      missing: 'environmentDetails.playProtectVerdict',
    };
  }
  if (!accepted.includes(verdict))
    return {
      ok: false,
      check,
      reason: 'gms_play_protect',
      detail: `Play Protect verdict is ${quote(verdict)}, not ${accepted.join(' or ')}`,
    };
  return { ok: true, check, required: true, detail: `Play Protect verdict is ${verdict}` };
}

function appAccessRisk(payload: PlayIntegrityPayload, policy: AndroidPackagePolicy): VerdictResult {
  const check = 'gms.appAccessRisk';
  const denied = policy.denyAppAccessRisk ?? [];
  if (denied.length === 0) return notRequired(check);
  const detected = payload.environmentDetails?.appAccessRiskVerdict?.appsDetected;
  if (detected === undefined) {
    return {
      ok: false,
      check,
      reason: 'gms_app_access_risk',
      detail: absent(
        'environmentDetails.appAccessRiskVerdict.appsDetected',
        undefined,
        'the app access risk verdict',
      ),
    };
  }
  const hit = detected.filter((d) => denied.includes(d));
  if (hit.length > 0)
    return {
      ok: false,
      check,
      reason: 'gms_app_access_risk',
      detail: `apps detected include ${hit.map(quote).join(', ')}, which the package denies`,
    };
  return {
    ok: true,
    check,
    required: true,
    detail: detected.length
      ? `apps detected (${detected.join(', ')}) include none the package denies`
      : 'no apps with access risk detected',
  };
}

function deviceActivity(
  payload: PlayIntegrityPayload,
  policy: AndroidPackagePolicy,
): VerdictResult {
  const check = 'gms.deviceActivity';
  const max = policy.maxDeviceActivity;
  if (!max) return notRequired(check);
  const level = payload.deviceIntegrity.recentDeviceActivity?.deviceActivityLevel;
  if (!isDeviceActivityLevel(level)) {
    const field = 'deviceIntegrity.recentDeviceActivity.deviceActivityLevel';
    return {
      ok: false,
      check,
      reason: 'gms_device_activity',
      detail: absent(field, level, 'recent device activity'),
      missing: field,
    };
  }
  if (DEVICE_ACTIVITY_LEVELS.indexOf(level) > DEVICE_ACTIVITY_LEVELS.indexOf(max)) {
    return {
      ok: false,
      check,
      reason: 'gms_device_activity',
      detail: `recent device activity is ${level}, above the maximum ${max}`,
    };
  }
  return {
    ok: true,
    check,
    required: true,
    detail: `recent device activity is ${level} (at most ${max})`,
  };
}

/**
 * The device recall policy step (`gms.deviceRecall`, reason `gms_device_recalled`): a token whose
 * `deviceIntegrity.deviceRecall` has any bit set that the package denies is rejected. A verdict
 * without device recall passes: Google sends it only to apps in the program, and a device the app
 * never wrote to has no bit set, so absence is the same as "nothing recalled".
 * @param payload the parsed verdict
 * @param policy the package entry (`denyRecallBits`)
 */
export function checkDeviceRecall(
  payload: PlayIntegrityPayload,
  policy: AndroidPackagePolicy,
): VerdictResult {
  const check = 'gms.deviceRecall';
  const denied = policy.denyRecallBits ?? [];
  if (denied.length === 0) return notRequired(check);
  const recall = payload.deviceIntegrity.deviceRecall;
  if (!recall)
    return {
      ok: true,
      check,
      required: true,
      detail: 'the verdict carries no device recall bits (none set)',
    };
  const set = RECALL_BITS.filter((b) => recall.values[RECALL_BIT_FIELDS[b]]);
  const hit = set.filter((b) => denied.includes(b));
  if (hit.length > 0)
    return {
      ok: false,
      check,
      reason: 'gms_device_recalled',
      detail: `device recall bit(s) ${hit.join(', ')} set, which the package denies (denied: ${denied.join(', ')})`,
    };
  return {
    ok: true,
    check,
    required: true,
    detail: set.length
      ? `device recall bit(s) ${set.join(', ')} set, none of them denied (${denied.join(', ')})`
      : 'no device recall bit set',
  };
}
