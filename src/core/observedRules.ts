/**
 * Observed rules (docs/checks.md): an allowlist entry may name policy rules, by their reason code,
 * whose failures are recorded but do not reject. Only policy rules are here: nothing that proves
 * who sent the token (parsing, session, nonce, signatures, chains, revocation, key ids, counters,
 * package or app binding, signing certificate, token age) may ever be observed.
 *
 * A new observable rule is one more code in its kind's `observable` (its descriptor), and a `trace.policyFailed`
 * call where the rule fails.
 */
import type { KindEntry } from './kind.js';
import { KINDS, type KindObservableReason } from './kinds.js';
import type { RejectReason } from './reasons.js';
import type { Service } from './services.js';

type OneKind = (typeof KINDS)[number];

/** The reason codes an entry may observe, per service (each kind's `observable`). */
export const OBSERVABLE_REASONS = Object.fromEntries(
  KINDS.map((k) => [k.service, k.observable]),
) as { readonly [K in OneKind as K['service']]: K['observable'] };

/** Every observable code is a rejection reason: a typo in a descriptor does not compile. */
export type ObservableReason = KindObservableReason & RejectReason;
const _observableAreReasons: readonly RejectReason[] = [] as readonly KindObservableReason[];
void _observableAreReasons;

/** The kinds of allowlist entry: an App Attest app, an Android package (gms and android-key). */
export type ObserveEntry = KindEntry;

/** The services whose rules an entry of each kind sets. */
const ENTRY_SERVICES: Readonly<Record<ObserveEntry, readonly Service[]>> = {
  apple: KINDS.filter((k) => k.entry === 'apple').map((k) => k.service),
  android: KINDS.filter((k) => k.entry === 'android').map((k) => k.service),
};

/** The codes an entry of `entry` may observe, in table order. */
export function observableCodes(entry: ObserveEntry): readonly ObservableReason[] {
  return ENTRY_SERVICES[entry].flatMap((s): readonly ObservableReason[] => OBSERVABLE_REASONS[s]);
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
