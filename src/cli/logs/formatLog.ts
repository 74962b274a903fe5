import { deviceIdOf, isRequest, levelLabel, messageLine, type LogEntry, type LogRecord } from './logRecord.js';

/** The longest reason code (`apple_environment_not_allowed`): plain lines pad to it so columns line up. */
const REASON_WIDTH = 29;
/** An App Attest key id (base64 of 32 bytes). */
const DEVICE_WIDTH = 44;
/** `/api/v1/attestation/verify`. */
const ROUTE_WIDTH = 26;

/**
 * Replaces control characters, so a crafted log line cannot move the cursor or recolour the
 * terminal, and keeps text to one line (a tab becomes a space).
 * @param text - text from the log
 */
export const clean = (text: string): string =>
  // eslint-disable-next-line no-control-regex
  text.replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) => (c === '\t' ? ' ' : '·'));

/**
 * Cuts or pads text to exactly `width` columns; a cut ends in '…'.
 * @param text - the text (one line)
 * @param width - columns
 * @param align - pad on the right (`left`, default) or on the left (`right`)
 */
export function fit(text: string, width: number, align: 'left' | 'right' = 'left'): string {
  if (width <= 0) return '';
  if (text.length > width) return width === 1 ? '…' : `${text.slice(0, width - 1)}…`;
  return align === 'left' ? text.padEnd(width) : text.padStart(width);
}

/**
 * Shortens a route to `width` by dropping leading path segments ("…/verify"), which keeps the
 * part that tells routes apart; cuts the end only when even the last segment is too long.
 * @param route - the route path
 * @param width - columns
 */
export function shortenRoute(route: string, width: number): string {
  if (route.length <= width) return route;
  const segments = route.split('/');
  for (let i = 1; i < segments.length; i++) {
    const tail = `…/${segments.slice(i).join('/')}`;
    if (tail.length <= width) return tail;
  }
  return fit(route, width);
}

/**
 * A time as the viewer's time column shows it, in UTC: `21:00:00.123`, or `11-22 21:00:00`
 * when the loaded lines span several days.
 * @param ms - epoch milliseconds
 * @param withDate - include the month and day
 */
export function formatClock(ms: number | undefined, withDate: boolean): string {
  if (ms === undefined) return '';
  const iso = new Date(ms).toISOString(); // 2026-11-22T21:00:00.123Z
  return withDate ? `${iso.slice(5, 10)} ${iso.slice(11, 19)}` : iso.slice(11, 23);
}

/**
 * A count with thousands separators.
 * @param n - the count
 */
export const formatCount = (n: number): string => n.toLocaleString('en-US');

/**
 * The plain-output line of an entry: for a request
 * `time status route service valid|invalid reason keyId|packageName requestId`, absent fields as
 * `-` so every request line has the same number of whitespace-separated fields (`awk`-friendly);
 * for another JSON line `time LEVEL message k=v…`; a line that is not JSON, as it was written.
 * @param entry - the line
 */
export function formatPlainLine(entry: LogEntry): string {
  const r = entry.record;
  if (r === undefined) return entry.raw;
  // Control characters decoded from JSON escapes ("\u001b[2J" in a field) must not reach a terminal.
  return clean(recordLine(r));
}

function recordLine(r: LogRecord): string {
  const time = r.timeMs === undefined ? '-' : new Date(r.timeMs).toISOString();
  if (!isRequest(r)) return `${time} ${levelLabel(r.level).toUpperCase().padEnd(5)} ${messageLine(r)}`;
  const valid = r.isValid === undefined ? '-' : r.isValid ? 'valid' : 'invalid';
  return [
    time,
    (r.status === undefined ? '-' : String(r.status)).padEnd(3),
    (r.route ?? '-').padEnd(ROUTE_WIDTH),
    (r.service ?? '-').padEnd(5),
    valid.padEnd(7),
    (r.reason ?? '-').padEnd(REASON_WIDTH),
    (deviceIdOf(r) ?? '-').padEnd(DEVICE_WIDTH),
    r.requestId ?? '-',
  ].join(' ');
}
