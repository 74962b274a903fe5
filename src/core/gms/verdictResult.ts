import type { ObservableReason } from '../observedRules.js';
import { quote } from './quote.js';

/** The check ids of the newer verdicts, in the order they run. */
export const VERDICT_CHECKS = [
  'gms.licensing',
  'gms.playProtect',
  'gms.appAccessRisk',
  'gms.deviceActivity',
  'gms.deviceRecall',
  'gms.accountActivity',
  'gms.locationSpoofing',
] as const;
export type VerdictCheck = (typeof VERDICT_CHECKS)[number];

export type VerdictResult =
  | { ok: true; check: VerdictCheck; required: boolean; detail: string }
  | {
      ok: false;
      check: VerdictCheck;
      reason: ObservableReason;
      detail: string;
      missing?: string;
    };

/** A newer-verdict check the package policy does not ask for. */
export function notRequired(check: VerdictCheck): VerdictResult {
  return { ok: true, check, required: false, detail: 'not required by the package policy' };
}

/** The detail for a required verdict that Google did not give (or did not evaluate). */
export function absent(field: string, value: string | undefined, what: string): string {
  return value === undefined
    ? `${field} is absent: the package requires it (turn on ${what} for the app in the Play Console)`
    : `${field} is ${quote(value)}: Google did not evaluate it, and the package requires it`;
}

/** The items of a comma-separated list, trimmed, empty ones dropped. */
export function splitList(text: string): string[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}
