import type { MinVerdict } from '../types.js';

/** The device verdicts that can be a minimum, weakest first (docs/token-format.md section 4, check 9). */
export const MIN_VERDICTS: readonly MinVerdict[] = ['MEETS_BASIC_INTEGRITY', 'MEETS_DEVICE_INTEGRITY', 'MEETS_STRONG_INTEGRITY'];

/** The minimum an allowlist entry holds when the operator names none. */
export const DEFAULT_MIN_VERDICT: MinVerdict = 'MEETS_DEVICE_INTEGRITY';

/** Whether `value` names one of the ranked verdicts. */
export function isMinVerdict(value: unknown): value is MinVerdict {
  return typeof value === 'string' && (MIN_VERDICTS as readonly string[]).includes(value);
}

/**
 * The strongest ranked verdict in a token's `deviceRecognitionVerdict`, or `null` when it holds
 * none (absent list, or only labels such as `MEETS_VIRTUAL_INTEGRITY` that rank nowhere).
 * @param verdicts the list as the token gave it
 */
export function strongestVerdict(verdicts: readonly string[]): MinVerdict | null {
  let best = -1;
  for (const v of verdicts) best = Math.max(best, MIN_VERDICTS.indexOf(v as MinVerdict));
  return MIN_VERDICTS[best] ?? null;
}

/**
 * Whether the verdicts hold `minimum`: a stronger verdict satisfies a weaker minimum, because
 * Google's levels are nested (a device meeting STRONG also meets DEVICE and BASIC), even where a
 * token lists only the strongest label.
 * @param verdicts the token's `deviceRecognitionVerdict`
 * @param minimum the allowlist entry's minimum
 */
export function meetsMinimumVerdict(verdicts: readonly string[], minimum: MinVerdict): boolean {
  const strongest = strongestVerdict(verdicts);
  return strongest !== null && MIN_VERDICTS.indexOf(strongest) >= MIN_VERDICTS.indexOf(minimum);
}
