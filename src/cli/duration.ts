const UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 };

/** Parses `90d`, `12h`, `30m`, `45s`, `2w` (or plain seconds) into seconds; `null` when it is not one. */
export function parseDuration(text: string): number | null {
  const m = /^(\d{1,9})([smhdw]?)$/.exec(text.trim());
  if (!m) return null;
  const seconds = Number(m[1]) * UNITS[m[2] || 's']!;
  return seconds > 0 ? seconds : null;
}
