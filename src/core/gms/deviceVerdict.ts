import type { MinVerdict } from '../ports.js';

/** The device verdicts that can be a minimum, weakest first (docs/token-format.md section 4, check 9). */
export const MIN_VERDICTS: readonly MinVerdict[] = [
  'MEETS_BASIC_INTEGRITY',
  'MEETS_DEVICE_INTEGRITY',
  'MEETS_STRONG_INTEGRITY',
];

/** The operator's short names for the minimums (`allowlist add android --min-verdict`, `dev mint gms --verdict`). */
export const MIN_VERDICT_LEVELS = {
  basic: 'MEETS_BASIC_INTEGRITY',
  device: 'MEETS_DEVICE_INTEGRITY',
  strong: 'MEETS_STRONG_INTEGRITY',
} as const satisfies Record<string, MinVerdict>;
export type MinVerdictLevel = keyof typeof MIN_VERDICT_LEVELS;
export const MIN_VERDICT_LEVEL_NAMES = Object.keys(MIN_VERDICT_LEVELS) as MinVerdictLevel[];

/** The short name of a minimum, e.g. `device` for MEETS_DEVICE_INTEGRITY. */
export function minVerdictLevelOf(verdict: MinVerdict): MinVerdictLevel {
  return MIN_VERDICT_LEVEL_NAMES.find((level) => MIN_VERDICT_LEVELS[level] === verdict)!;
}

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
