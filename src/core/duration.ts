const UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 };

/** Longest duration accepted: 100 years (longer ones overflow database timestamps). */
const MAX_SECONDS = 100 * 365 * 86_400;

/**
 * Parses `90d`, `12h`, `30m`, `45s`, `2w` into seconds; `null` when it is not one (or over 100
 * years). The unit is required: `90` could mean seconds or days, and a guess lets a key that
 * should live 90 days expire after 90 seconds.
 */
export function parseDuration(text: string): number | null {
  const m = /^(\d{1,9})([smhdw])$/.exec(text.trim());
  if (!m) return null;
  const seconds = Number(m[1]) * UNITS[m[2]!]!;
  return seconds > 0 && seconds <= MAX_SECONDS ? seconds : null;
}

/** The usage error text for a bad duration given to `flag`. */
export function durationProblem(flag: string, text: string): string {
  if (/^\s*\d+\s*$/.test(text))
    return `${flag} ${text.trim()} has no unit: write ${text.trim()}s, ${text.trim()}m, ${text.trim()}h, ${text.trim()}d or ${text.trim()}w`;
  return `${flag} takes a duration such as 30m, 12h, 90d or 2w (up to 100 years), got "${text}"`;
}
