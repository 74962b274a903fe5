/**
 * Observed rules (docs/checks.md): an allowlist entry may name policy rules, by their reason code,
 * whose failures are recorded but do not reject. Only policy rules are here: nothing that proves
 * who sent the token (parsing, session, nonce, signatures, chains, revocation, key ids, counters,
 * package or app binding, signing certificate, token age) may ever be observed.
 *
 * A new observable rule is one more code in its service's list below, and a `trace.policyFailed`
 * call where the rule fails.
 */
import type { RejectReason } from './reasons.js';
import type { Service } from './services.js';

/** The reason codes an entry may observe, per service. */
export const OBSERVABLE_REASONS = {
  gms: [
    'gms_integrity_insufficient',
    'gms_app_not_recognized',
    'gms_not_licensed',
    'gms_play_protect',
    'gms_app_access_risk',
    'gms_device_activity',
    'gms_device_recalled',
    'gms_account_activity',
    'gms_location_spoofing',
  ],
  apple: [
    'apple_environment_not_allowed',
    'apple_receipt_invalid',
    'apple_risk_exceeded',
    'apple_distribution_not_allowed',
    'apple_platform_not_allowed',
    'device_rate_exceeded',
  ],
  'android-key': [
    'android_security_level_insufficient',
    'android_boot_state_insufficient',
    'android_patch_level_stale',
    'device_rate_exceeded',
    'android_issuer_overused',
  ],
  // Play Integrity for PC: every failed check refuses (nothing is observable yet)
  'gms-pc': [],
} as const satisfies Record<Service, readonly RejectReason[]>;

export type ObservableReason = (typeof OBSERVABLE_REASONS)[Service][number];

/** The kinds of allowlist entry: an App Attest app, an Android package (gms and android-key). */
export type ObserveEntry = 'apple' | 'android';

/** The services whose rules an entry of each kind sets. */
const ENTRY_SERVICES: Readonly<Record<ObserveEntry, readonly Service[]>> = {
  apple: ['apple'],
  android: ['gms', 'android-key'],
};

/** The codes an entry of `entry` may observe, in table order. */
export function observableCodes(entry: ObserveEntry): readonly ObservableReason[] {
  return ENTRY_SERVICES[entry].flatMap((s) => OBSERVABLE_REASONS[s]);
}

const ALL_OBSERVABLE: ReadonlySet<string> = new Set(
  Object.values(OBSERVABLE_REASONS).flatMap((codes) => [...codes]),
);

/** Whether `code` is an observable reason of any service. */
export function isObservableReason(code: string): code is ObservableReason {
  return ALL_OBSERVABLE.has(code);
}

/**
 * Parses `--observe` / `--enforce` values: comma-separated reason codes, each observable for the
 * entry's kind. Order and case of the input do not matter; the result follows the table.
 * @returns the codes, or a one-line problem that lists the observable ones
 */
export function parseObserveCodes(
  entry: ObserveEntry,
  text: string,
): { ok: true; codes: ObservableReason[] } | { ok: false; problem: string } {
  const allowed = observableCodes(entry);
  const items = text
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);
  const listing = `observable for ${entry}: ${allowed.join(', ')}`;
  if (items.length === 0) return { ok: false, problem: `expected reason codes (${listing})` };
  const unknown = items.filter((c) => !(allowed as readonly string[]).includes(c));
  if (unknown.length > 0)
    return {
      ok: false,
      problem: `${unknown.map((c) => `"${c}"`).join(', ')} cannot be observed (${listing})`,
    };
  return { ok: true, codes: allowed.filter((c) => items.includes(c)) };
}
