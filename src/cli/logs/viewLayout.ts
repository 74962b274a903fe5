/**
 * Sizes and text shaping for the viewer, as pure functions: the components only draw what these
 * decide, and the numbers can be checked without a terminal.
 */
import { REJECT_REASONS } from '../../core/rejectReasons.js';
import { SERVICES } from '../../core/services.js';
import { clean } from './formatLog.js';
import { isRequest, levelLabel, type LogEntry } from './logRecord.js';

/** The service column holds the longest service name whole (`android-key`). */
const SERVICE_WIDTH = Math.max(...SERVICES.map((s) => s.length));
/** The longest reason code (`android_security_level_insufficient`): what the reason column grows to. */
const REASON_WIDTH = Math.max(...REJECT_REASONS.map((r) => r.length));
/** How the reason column names a valid verify's failed observed rules: `observed <codes>`. */
export const OBSERVED_PREFIX = 'observed ';
/** The API key's mode: `live` or `test`; one column (`T` for test) on narrow terminals. */
const MODE_WIDTH = 4;

/** At this width and above the summary is a pane on the right; below, two lines under the list. */
export const WIDE_COLUMNS = 120;
/** The side pane: border, space, a 29-character reason code, its count and a bar. */
const SIDE_WIDTH = 42;

/** How the screen is shared out. */
export interface ViewLayout {
  readonly width: number;
  readonly height: number;
  /** Summary as a right-hand pane (`side`) or as lines under the list (`bottom`, hidden while the detail pane is open). */
  readonly summary: 'side' | 'bottom' | 'none';
  /** Width of the side pane, including its border. */
  readonly sideWidth: number;
  /** Width of the list and detail pane. */
  readonly mainWidth: number;
  /** Rows between the header and the key help. */
  readonly mainHeight: number;
  /** Rows of lines in the list (the column header is extra). */
  readonly listRows: number;
  /** Lines of text in the detail pane (its title line is extra); 0 when closed. */
  readonly detailRows: number;
  /** Lines of the bottom summary (its separator is extra). */
  readonly summaryRows: number;
}

const HEADER = 1;
const FOOTER = 2;
const COLUMN_HEADER = 1;

/**
 * Shares the screen between header, list, detail, summary and key help.
 * @param width - columns available
 * @param height - rows available
 * @param detail - whether the detail pane is open
 */
export function computeLayout(width: number, height: number, detail: boolean): ViewLayout {
  const main = Math.max(4, height - HEADER - FOOTER);
  const wide = width >= WIDE_COLUMNS;
  // Fixed: what the pane shows (the longest reason code and its count) does not grow with the terminal.
  const sideWidth = wide ? SIDE_WIDTH : 0;
  const mainWidth = width - sideWidth;
  let summaryRows = 0;
  let summary: ViewLayout['summary'] = wide ? 'side' : 'none';
  if (!wide && !detail && main >= 10) {
    summary = 'bottom';
    summaryRows = main >= 27 ? 3 : 2;
  }
  const below = summary === 'bottom' ? summaryRows + 1 : 0;
  let listRows = main - COLUMN_HEADER - below;
  let detailRows = 0;
  if (detail) {
    // The list keeps a third of the room so the selection keeps its context; the record gets the rest.
    listRows = Math.max(3, Math.round((main - COLUMN_HEADER) * 0.33));
    detailRows = Math.max(1, main - COLUMN_HEADER - listRows - 1);
  }
  return {
    width,
    height,
    summary,
    sideWidth,
    mainWidth,
    mainHeight: main,
    listRows: Math.max(1, listRows),
    detailRows,
    summaryRows,
  };
}

/** Widths of the list's columns; a 0 width hides the column. */
export interface TableColumns {
  readonly time: number;
  readonly status: number;
  readonly route: number;
  readonly service: number;
  readonly valid: number;
  readonly reason: number;
  readonly apiKey: number;
  /** The API key's mode (live, test). */
  readonly mode: number;
  /** keyId or packageName. */
  readonly device: number;
  /** The free-text `detail` of a rejection. */
  readonly detail: number;
}

/**
 * Column widths for a list `width` columns wide (a 1-column selection mark comes first, and one
 * space between columns). Fixed columns first; the rest grows in steps, most useful first: most
 * reason codes, `…/verify`, enough of an API key id to tell keys apart, then the longest reason
 * code, `…/attestation/verify`, the whole key id (16), the longest code after `observed `, the
 * whole route, then the device id
 * column and the detail column on wide terminals. What is left goes to the last text column (the
 * detail, or else the device, or else the reason: an observed verify lists its codes there), so
 * the columns share the whole width.
 * @param width - the list's width
 * @param withDate - times include the date (the lines span several days)
 */
export function tableColumns(width: number, withDate: boolean): TableColumns {
  const time = withDate ? 14 : 12;
  const cols = {
    time,
    status: 3,
    route: 8,
    service: SERVICE_WIDTH,
    valid: 1,
    reason: 12,
    apiKey: 8,
    mode: 1,
    device: 0,
    detail: 0,
  };
  let rest =
    width - 1 - (time + 3 + SERVICE_WIDTH + 1 + 1) - 7 - (cols.route + cols.reason + cols.apiKey);
  const grow = (col: 'route' | 'reason' | 'apiKey' | 'device' | 'detail', upTo: number) => {
    const add = Math.max(0, Math.min(rest, upTo - cols[col]));
    cols[col] += add;
    rest -= add;
  };
  grow('reason', 26);
  // the mode whole once the common reason codes are: `test` or `live`, else `T` alone
  if (rest >= MODE_WIDTH - 1) {
    cols.mode = MODE_WIDTH;
    rest -= MODE_WIDTH - 1;
  }
  grow('route', 12);
  grow('apiKey', 12);
  grow('reason', REASON_WIDTH);
  grow('route', 20);
  grow('apiKey', 16);
  // an observed verify's code whole after its word (`observed apple_distribution_not_allowed`)
  grow('reason', OBSERVED_PREFIX.length + REASON_WIDTH);
  grow('route', 26);
  // Optional columns appear only when useful: a package name (com.example.app) must fit in the
  // device column, and the rejection's detail text gets whatever is left.
  if (rest >= 17) {
    rest -= 1; // the gap before it
    grow('device', 24);
  }
  if (cols.device > 0 && rest >= 17) {
    rest -= 1;
    grow('detail', rest);
  }
  if (rest < 0) {
    // Narrower than the minimums (a tiny terminal): take it from the reason column.
    cols.reason = Math.max(4, cols.reason + rest);
  } else if (rest > 0) {
    // nothing left unused: the last text column takes it
    if (cols.detail > 0) cols.detail += rest;
    else if (cols.device > 0) cols.device += rest;
    else cols.reason += rest;
  }
  return cols;
}

/**
 * Wraps text to `width` columns: at spaces where it can, hard breaks in long words (base64, ids).
 * @param text - the text; newlines start new lines
 * @param width - columns
 */
export function wrapText(text: string, width: number): string[] {
  const w = Math.max(1, width);
  const out: string[] = [];
  for (const paragraph of text.split('\n')) {
    let line = '';
    for (const word of clean(paragraph).split(' ')) {
      let rest = word;
      const sep = line === '' ? '' : ' ';
      if (line.length + sep.length + rest.length <= w) {
        line += sep + rest;
        continue;
      }
      if (line !== '') out.push(line);
      line = '';
      while (rest.length > w) {
        out.push(rest.slice(0, w));
        rest = rest.slice(w);
      }
      line = rest;
    }
    out.push(line);
  }
  return out;
}

/** One line of the detail pane: the field name on its first line only. */
export interface DetailLine {
  readonly key: string;
  readonly value: string;
  readonly tone?: 'good' | 'bad' | 'warn' | 'dim';
}

/** Request fields in the order a reader wants them: when, what happened, why, who; pino's own after. */
const REQUEST_ORDER = [
  'time',
  'status',
  'method',
  'route',
  'service',
  'approach',
  'isValid',
  'reason',
  'detail',
  'keyId',
  'observed',
  'packageName',
  'apiKeyId',
  'mode',
  'requestId',
  'durationMs',
];
/** Other lines: their message and level first. */
const OTHER_ORDER = ['time', 'level', 'msg', 'err'];

function valueText(key: string, v: unknown): { text: string; tone?: DetailLine['tone'] } {
  if (key === 'level' && typeof v === 'number') {
    const label = levelLabel(v);
    return { text: `${v} (${label})`, tone: v >= 50 ? 'bad' : v >= 40 ? 'warn' : undefined };
  }
  if (key === 'time' && typeof v === 'number')
    return { text: `${v} (${new Date(v).toISOString()})` };
  if (key === 'isValid' && typeof v === 'boolean')
    return { text: v ? 'true' : 'false (rejected)', tone: v ? 'good' : 'bad' };
  if (key === 'reason') return { text: String(v), tone: 'bad' };
  if (key === 'status' && typeof v === 'number')
    return { text: String(v), tone: v >= 500 ? 'bad' : v >= 400 ? 'warn' : 'good' };
  if (typeof v === 'string') return { text: v };
  return { text: JSON.stringify(v) ?? String(v) };
}

/**
 * The whole record of a line as wrapped `key  value` lines; objects (`err`) one level deep, an
 * error's stack line by line.
 * @param entry - the line
 * @param width - the pane's width
 */
export function detailLines(entry: LogEntry, width: number): DetailLine[] {
  const r = entry.record;
  if (r === undefined) {
    return wrapText(entry.raw, Math.max(10, width - 12)).map((value, i) => ({
      key: i === 0 ? 'not JSON' : '',
      value,
      tone: 'dim' as const,
    }));
  }
  const order = isRequest(r) ? REQUEST_ORDER : OTHER_ORDER;
  const keys = [
    ...order.filter((k) => k in r.fields),
    ...Object.keys(r.fields).filter((k) => !order.includes(k)),
  ];
  const fields: [string, unknown][] = [];
  for (const k of keys) {
    const v = r.fields[k];
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
      for (const [k2, v2] of Object.entries(v as Record<string, unknown>))
        fields.push([`${k}.${k2}`, v2]);
    } else {
      fields.push([k, v]);
    }
  }
  const keyWidth = Math.min(16, Math.max(...fields.map(([k]) => clean(k).length), 4));
  const valueWidth = Math.max(10, width - keyWidth - 3);
  const out: DetailLine[] = [];
  for (const [k, v] of fields) {
    const { text, tone } = valueText(k, v);
    wrapText(text, valueWidth).forEach((value, i) =>
      out.push({ key: i === 0 ? clean(k) : '', value, tone }),
    );
  }
  return out;
}
