/**
 * One line of the service's pino log, parsed once into the few typed fields the viewer and the
 * plain printer use. No UI dependencies: the ink viewer, the plain printer and the tests share it.
 *
 * Parsing never throws: a line that is not a JSON object is kept as raw text, and a field of an
 * unexpected type is left out of the typed view (it stays in `fields` for the detail pane).
 */

/** A parsed pino line. The typed members are present only when the line carried them with the expected type. */
export interface LogRecord {
  /** Every field of the line, as written. */
  readonly fields: Readonly<Record<string, unknown>>;
  /** `time` as epoch milliseconds (pino writes an ISO string here, or epoch ms by default). */
  readonly timeMs?: number;
  /** pino level number (30 info, 40 warn, 50 error); label levels ("warn") are mapped to numbers. */
  readonly level?: number;
  readonly msg?: string;
  readonly requestId?: string;
  readonly method?: string;
  readonly route?: string;
  readonly status?: number;
  readonly durationMs?: number;
  readonly apiKeyId?: string;
  /** the API key's mode: `live` or `test` */
  readonly mode?: string;
  readonly approach?: string;
  readonly service?: string;
  readonly isValid?: boolean;
  /** the observed rules that failed (a valid verify's `observed: [codes]`) */
  readonly observed?: readonly string[];
  readonly reason?: string;
  readonly detail?: string;
  readonly keyId?: string;
  readonly packageName?: string;
  /** Why the API key was refused (401/403: `missing`, `revoked`…). */
  readonly auth?: string;
  /** `err.message` (or `err` itself when it is a string), for error lines. */
  readonly errorMessage?: string;
}

/**
 * One loaded line. `seq` numbers lines in arrival order and never repeats, so it identifies a
 * line across ring-buffer evictions and filter changes; `record` is absent for non-JSON lines.
 */
export interface LogEntry {
  readonly seq: number;
  readonly raw: string;
  readonly record?: LogRecord;
  /** The file the line was read from, when several are merged. */
  readonly source?: string;
}

const LEVEL_NUMBERS: Readonly<Record<string, number>> = {
  trace: 10,
  debug: 20,
  info: 30,
  warn: 40,
  error: 50,
  fatal: 60,
};

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const num = (v: unknown): number | undefined =>
  typeof v === 'number' && Number.isFinite(v) ? v : undefined;

function parseTime(v: unknown): number | undefined {
  if (typeof v === 'number') return Number.isFinite(v) ? v : undefined;
  if (typeof v !== 'string') return undefined;
  const ms = Date.parse(v);
  return Number.isNaN(ms) ? undefined : ms;
}

function parseLevel(v: unknown): number | undefined {
  if (typeof v === 'number') return num(v);
  return typeof v === 'string' ? LEVEL_NUMBERS[v.toLowerCase()] : undefined;
}

function errorMessageOf(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (v !== null && typeof v === 'object') return str((v as Record<string, unknown>).message);
  return undefined;
}

/**
 * Parses one log line.
 * @param line - the line without its newline
 * @returns the record, or `undefined` when the line is not a JSON object (raw text)
 */
export function parseLogLine(line: string): LogRecord | undefined {
  // Cheap pre-check: pino lines start with '{'; skipping JSON.parse on plain text keeps a
  // mostly-garbage file fast and avoids turning `42` or `"x"` into records.
  if (!line.trimStart().startsWith('{')) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return undefined;
  const f = parsed as Record<string, unknown>;
  return {
    fields: f,
    timeMs: parseTime(f.time),
    level: parseLevel(f.level),
    msg: str(f.msg),
    requestId: str(f.requestId),
    method: str(f.method),
    route: str(f.route),
    status: num(f.status),
    durationMs: num(f.durationMs),
    apiKeyId: str(f.apiKeyId),
    mode: str(f.mode),
    approach: str(f.approach),
    service: str(f.service),
    isValid: typeof f.isValid === 'boolean' ? f.isValid : undefined,
    observed: Array.isArray(f.observed)
      ? f.observed.filter((c): c is string => typeof c === 'string')
      : undefined,
    reason: str(f.reason),
    detail: str(f.detail),
    keyId: str(f.keyId),
    packageName: str(f.packageName),
    auth: str(f.auth),
    errorMessage: errorMessageOf(f.err),
  };
}

/** True for the one-per-request lines (they carry a route or a status); false for "listening" and the like. */
export const isRequest = (r: LogRecord): boolean => r.route !== undefined || r.status !== undefined;

/** The result-token consume route: its lines carry `isValid` too, but they are not verifications. */
export const CONSUME_ROUTE = '/api/v1/results/consume';

/** True for a verification the service rejected (`isValid: false`). */
export const isRejection = (r: LogRecord | undefined): boolean => r?.isValid === false;

/**
 * True for a valid verification that failed an observed rule: what enforcing that rule would
 * have turned away (the rollout's question).
 */
export const isObserved = (r: LogRecord | undefined): boolean =>
  r?.isValid === true && r.route !== CONSUME_ROUTE && (r.observed?.length ?? 0) > 0;

/** The device-side identifier of a verification: the App Attest key id, else the Android package. */
export const deviceIdOf = (r: LogRecord): string | undefined => r.keyId ?? r.packageName;

/**
 * A short level label.
 * @param level - pino level number
 */
export function levelLabel(level: number | undefined): string {
  if (level === undefined) return 'info';
  if (level >= 60) return 'fatal';
  if (level >= 50) return 'error';
  if (level >= 40) return 'warn';
  if (level >= 30) return 'info';
  if (level >= 20) return 'debug';
  return 'trace';
}

/** pino's own bookkeeping fields, left out of one-line summaries of non-request lines. */
const HOUSEKEEPING = new Set(['level', 'time', 'pid', 'hostname', 'msg', 'err', 'v']);

/**
 * A one-line text for a non-request line: its message, the error message, then its other
 * scalar fields as `k=v` ("listening port=8080 host=0.0.0.0").
 * @param r - the record
 */
export function messageLine(r: LogRecord): string {
  const parts: string[] = [];
  if (r.msg !== undefined) parts.push(r.msg);
  if (r.errorMessage !== undefined && r.errorMessage !== r.msg)
    parts.push(`err="${r.errorMessage}"`);
  for (const [k, v] of Object.entries(r.fields)) {
    if (HOUSEKEEPING.has(k)) continue;
    if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean')
      parts.push(`${k}=${String(v)}`);
  }
  return parts.join(' ');
}
