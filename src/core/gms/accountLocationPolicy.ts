/**
 * Play's account activity and location spoofing verdicts as package rules (`gms.accountActivity`,
 * `gms.locationSpoofing`). Both verdicts are opted in per app in the Play Console and come only
 * when Google evaluated them.
 *
 * `accountDetails.accountActivity.activityLevel` takes the values of Google's discovery document
 * for the Play Integrity API (AccountActivity.activityLevel): ACTIVITY_LEVEL_UNSPECIFIED,
 * UNEVALUATED, UNUSUAL, UNKNOWN, TYPICAL_BASIC, TYPICAL_STRONG, in that order of trust.
 *
 * `environmentDetails.locationSpoofingRiskVerdict` is a list of text values in Google's client
 * libraries (googleapis for Dart 19.0.0, EnvironmentDetails.locationSpoofingRiskVerdict); Google's
 * reference gave no list of the values when this was written, so the rule takes the value names
 * the operator denies as they are, and a value this version has never seen is data like any other.
 */
import type { AccountActivityLevel, AndroidPackagePolicy } from '../ports.js';
import type { PlayIntegrityPayload } from './playIntegrityPayload.js';
import { quote } from './quote.js';
import { absent, notRequired, splitList, type VerdictResult } from './verdictResult.js';

/** The ranked account activity levels, least trusted first. */
export const ACCOUNT_ACTIVITY_LEVELS: readonly AccountActivityLevel[] = [
  'UNUSUAL',
  'UNKNOWN',
  'TYPICAL_BASIC',
  'TYPICAL_STRONG',
];

/** Whether `value` names a ranked account activity level. */
export function isAccountActivityLevel(value: unknown): value is AccountActivityLevel {
  return (
    typeof value === 'string' && (ACCOUNT_ACTIVITY_LEVELS as readonly string[]).includes(value)
  );
}

/**
 * Parses `--min-account-activity` (and `dev mint gms --account-activity` of a ranked level): a
 * level in any case, `-` for `_` (`typical-basic`).
 */
export function parseAccountActivityLevel(
  text: string,
): { ok: true; value: AccountActivityLevel } | { ok: false; problem: string } {
  const level = text.trim().toUpperCase().replace(/-/g, '_');
  return isAccountActivityLevel(level)
    ? { ok: true, value: level }
    : { ok: false, problem: `"${text}" is not one of ${ACCOUNT_ACTIVITY_LEVELS.join(', ')}` };
}

/** A verdict value name as Google spells them: capitals, digits and `_`, at most 64. */
export const VERDICT_VALUE = /^[A-Z][A-Z0-9_]{0,63}$/;
/** At most this many values in a list the operator gives (and a minted verdict carries). */
export const MAX_VERDICT_VALUES = 16;

/**
 * Parses a comma-separated list of verdict value names (any case), such as `--deny-location-spoofing`
 * and the list flags of `dev mint gms`. Unknown names are kept: Google adds values over time.
 * @param what the values, for the problem ("location spoofing risk")
 */
export function parseVerdictValues(
  text: string,
  what: string,
): { ok: true; values: string[] } | { ok: false; problem: string } {
  const values = [...new Set(splitList(text).map((v) => v.toUpperCase()))];
  if (values.length === 0) return { ok: false, problem: `expected at least one ${what} value` };
  if (values.length > MAX_VERDICT_VALUES)
    return { ok: false, problem: `at most ${MAX_VERDICT_VALUES} ${what} values` };
  const bad = values.find((v) => !VERDICT_VALUE.test(v));
  if (bad !== undefined)
    return {
      ok: false,
      problem: `${quote(bad)} is not a verdict value name (capitals, digits and _, such as HIGH_RISK)`,
    };
  return { ok: true, values };
}

/**
 * `gms.accountActivity` (reason `gms_account_activity`): the account activity level must be at
 * least the package's minimum. Absent, UNEVALUATED, or a level this version does not rank is a
 * rejection, never a pass.
 */
export function checkAccountActivity(
  payload: PlayIntegrityPayload,
  policy: AndroidPackagePolicy,
): VerdictResult {
  const check = 'gms.accountActivity';
  const min = policy.minAccountActivity;
  if (!min) return notRequired(check);
  const field = 'accountDetails.accountActivity.activityLevel';
  const level = payload.accountDetails?.accountActivity?.activityLevel;
  if (level === undefined || level === 'UNEVALUATED')
    return {
      ok: false,
      check,
      reason: 'gms_account_activity',
      detail: absent(field, level, 'account activity'),
      missing: field,
    };
  if (!isAccountActivityLevel(level))
    return {
      ok: false,
      check,
      reason: 'gms_account_activity',
      detail: `account activity is ${quote(level)}, a level this version does not rank (the package requires at least ${min})`,
    };
  if (ACCOUNT_ACTIVITY_LEVELS.indexOf(level) < ACCOUNT_ACTIVITY_LEVELS.indexOf(min))
    return {
      ok: false,
      check,
      reason: 'gms_account_activity',
      detail: `account activity is ${level}, below the minimum ${min}`,
    };
  return {
    ok: true,
    check,
    required: true,
    detail: `account activity is ${level} (at least ${min})`,
  };
}

/**
 * `gms.locationSpoofing` (reason `gms_location_spoofing`): the location spoofing risk verdict must
 * hold none of the values the package denies. A verdict Google did not give, or did not evaluate,
 * is a rejection: the package asked for it.
 */
export function checkLocationSpoofing(
  payload: PlayIntegrityPayload,
  policy: AndroidPackagePolicy,
): VerdictResult {
  const check = 'gms.locationSpoofing';
  const denied = policy.denyLocationSpoofing ?? [];
  if (denied.length === 0) return notRequired(check);
  const field = 'environmentDetails.locationSpoofingRiskVerdict';
  const verdict = payload.environmentDetails?.locationSpoofingRiskVerdict;
  if (verdict === undefined || verdict.includes('UNEVALUATED'))
    return {
      ok: false,
      check,
      reason: 'gms_location_spoofing',
      detail: absent(field, verdict && 'UNEVALUATED', 'the location spoofing risk verdict'),
      missing: field,
    };
  const hit = verdict.filter((v) => denied.includes(v));
  if (hit.length > 0)
    return {
      ok: false,
      check,
      reason: 'gms_location_spoofing',
      detail: `location spoofing risk includes ${hit.map(quote).join(', ')}, which the package denies`,
    };
  return {
    ok: true,
    check,
    required: true,
    detail: verdict.length
      ? `location spoofing risk (${verdict.map(quote).join(', ')}) includes none the package denies`
      : 'no location spoofing risk reported',
  };
}
