const UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 };

/** Longest duration accepted: 100 years (longer ones overflow database timestamps). */
const MAX_SECONDS = 100 * 365 * 86_400;

/** Parses `90d`, `12h`, `30m`, `45s`, `2w` (or plain seconds) into seconds; `null` when it is not one (or over 100 years). */
export function parseDuration(text: string): number | null {
  const m = /^(\d{1,9})([smhdw]?)$/.exec(text.trim());
  if (!m) return null;
  const seconds = Number(m[1]) * UNITS[m[2] || 's']!;
  return seconds > 0 && seconds <= MAX_SECONDS ? seconds : null;
}
