import { paint, safeText, type Paint } from '../terminalText.js';
import {
  deviceIdOf,
  isObserved,
  isRequest,
  levelLabel,
  messageLine,
  type LogEntry,
  type LogRecord,
} from './logRecord.js';

/** The longest reason code (`apple_environment_not_allowed`): plain lines pad to it so columns line up. */
const REASON_WIDTH = 29;
/** An App Attest key id (base64 of 32 bytes). */
const DEVICE_WIDTH = 44;
/** `/api/v1/attestation/verify`. */
const ROUTE_WIDTH = 26;

/**
 * The one escaping function of terminal output ({@link safeText}), under the viewer's old name:
 * a crafted log line cannot move the cursor, recolour the terminal or reorder text.
 */
export const clean = safeText;

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
 * `time status route service valid|invalid reason keyId|packageName requestId ["detail"]`,
 * absent fields as `-` so every request line starts with the same eight whitespace-separated
 * fields (`awk`-friendly); a request refused before verification shows its API key cause
 * (`auth:revoked`) as the reason, a valid verify that failed observed rules their codes
 * (`observed:apple_risk_exceeded`); the free-text `detail` comes last, as a JSON string. Another
 * JSON line is `time LEVEL message k=v…`; a line that is not JSON is printed as written, escaped.
 * With several files, `instance` (the line's hostname, else its file) comes first.
 * @param entry - the line
 * @param options.instance - print the instance column
 * @param options.paint - colours for the verdict
 */
export function formatPlainLine(
  entry: LogEntry,
  options: { instance?: boolean; paint?: Paint } = {},
): string {
  const r = entry.record;
  const prefix = options.instance === true ? `${safeText(instanceOf(entry)).padEnd(12)} ` : '';
  if (r === undefined) return prefix + safeText(entry.raw);
  // Control characters decoded from JSON escapes ("\u001b[2J" in a field) must not reach a terminal.
  return prefix + recordLine(r, options.paint ?? paint(false));
}

/** The server instance a line came from: its pino `hostname`, else the file it was read from. */
export function instanceOf(entry: LogEntry): string {
  const host = entry.record?.fields.hostname;
  return typeof host === 'string' && host !== '' ? host : (entry.source ?? '-');
}

function recordLine(r: LogRecord, p: Paint): string {
  const time = r.timeMs === undefined ? '-' : new Date(r.timeMs).toISOString();
  if (!isRequest(r))
    return safeText(`${time} ${levelLabel(r.level).toUpperCase().padEnd(5)} ${messageLine(r)}`);
  const valid = r.isValid === undefined ? '-' : r.isValid ? 'valid' : 'invalid';
  const why = isObserved(r)
    ? `observed:${(r.observed ?? []).join(',')}`
    : (r.reason ?? (r.auth !== undefined ? `auth:${r.auth}` : '-'));
  const colour = r.isValid === true ? p.green : r.isValid === false ? p.red : (s: string) => s;
  return [
    time,
    (r.status === undefined ? '-' : String(r.status)).padEnd(3),
    safeText(r.route ?? '-').padEnd(ROUTE_WIDTH),
    safeText(r.service ?? '-').padEnd(5),
    colour(valid.padEnd(7)),
    safeText(why).padEnd(REASON_WIDTH),
    safeText(deviceIdOf(r) ?? '-').padEnd(DEVICE_WIDTH),
    safeText(r.requestId ?? '-'),
    ...(r.detail !== undefined
      ? [safeText(JSON.stringify(r.detail))]
      : r.errorMessage !== undefined
        ? [safeText(JSON.stringify(r.errorMessage))]
        : []),
  ].join(' ');
}
