import {
  CONSUME_ROUTE,
  isRequest,
  parseLogLine,
  type LogEntry,
  type LogRecord,
} from './logRecord.js';

/** How many lines the viewer keeps by default. */
export const DEFAULT_LIMIT = 10_000;

/** Counts for one platform or one API key: verifications seen and how many were rejected. */
export interface VerifyCounts {
  readonly name: string;
  readonly total: number;
  readonly rejected: number;
  /** an API key's mode (`live`, `test`), as its last line said */
  readonly mode?: string;
}

/** What is loaded, counted: what is being rejected and why, at a glance. */
export interface LogSummary {
  /** Lines loaded (parsed or not). */
  readonly lines: number;
  /** Lines that were not JSON objects. */
  readonly unparsed: number;
  /** Request lines (they carry a route or a status). */
  readonly requests: number;
  /** Verify requests whose line carries `isValid` (result-token consumes are apart). */
  readonly verifications: number;
  readonly rejected: number;
  /** Result-token consumes (`/api/v1/results/consume`) and how many were refused. */
  readonly consumes: number;
  readonly consumesRefused: number;
  /** Valid verifications that failed at least one observed rule (the `o` filter shows them). */
  readonly observedVerifications: number;
  /** Verifications made with test-mode API keys (a rehearsal: apart from the live figures). */
  readonly testVerifications: number;
  /** Observed rules that failed in valid verifies, per reason code, most frequent first. */
  readonly observed: readonly { readonly name: string; readonly count: number }[];
  /** Responses with a 4xx / 5xx status. */
  readonly clientErrors: number;
  readonly serverErrors: number;
  /** Rejections per reason, most frequent first. */
  readonly reasons: readonly { readonly name: string; readonly count: number }[];
  /** Verifications per platform (`service`; `unknown` when the line has none), most frequent first. */
  readonly services: readonly VerifyCounts[];
  /** Requests per API key id, most frequent first. */
  readonly apiKeys: readonly VerifyCounts[];
}

/** Where the lines come from and what the reader is doing. */
export interface SourceStatus {
  /** What is being read ("app.log", "stdin"). */
  readonly source: string;
  /** `loading`: reading what exists; `following`: caught up, waiting for more; `done`: end of input. */
  readonly phase: 'loading' | 'following' | 'done' | 'error';
  /** The last reader error, shown until the next successful read. */
  readonly error?: string;
  /** Times the followed file was rotated (copytruncate or rename) and reopened. */
  readonly rotations: number;
  /** Bytes at the head of the file not read because only the tail is kept. */
  readonly skippedBytes: number;
}

/** An immutable view of the store, the value `useSyncExternalStore` compares. */
export interface LogStoreSnapshot {
  /** The loaded lines, oldest first; at most `limit` of them. */
  readonly entries: readonly LogEntry[];
  readonly summary: LogSummary;
  readonly status: SourceStatus;
  readonly limit: number;
  /** Lines received since the start, including those evicted. */
  readonly received: number;
}

interface MutableCounts {
  total: number;
  rejected: number;
  mode?: string;
}

/**
 * A bounded store of log lines, independent of React: a ring buffer of the last `limit` lines
 * and counts kept in step with it (added on arrival, taken back on eviction), so memory and
 * per-line work stay constant however large the log is. The ink viewer reads it through
 * `useSyncExternalStore`; readers call `append` with batches of lines.
 */
export class LogStore {
  private readonly ring: (LogEntry | undefined)[];
  private head = 0; // index of the oldest entry
  private size = 0;
  private nextSeq = 0;
  private unparsed = 0;
  private requests = 0;
  private verifications = 0;
  private rejected = 0;
  private consumes = 0;
  private consumesRefused = 0;
  private observedVerifications = 0;
  private testVerifications = 0;
  private readonly observed = new Map<string, number>();
  private clientErrors = 0;
  private serverErrors = 0;
  private readonly reasons = new Map<string, number>();
  private readonly services = new Map<string, MutableCounts>();
  private readonly apiKeys = new Map<string, MutableCounts>();
  private status: SourceStatus;
  private readonly listeners = new Set<() => void>();
  private snapshot: LogStoreSnapshot | undefined;

  /**
   * @param limit - how many lines to keep (the oldest are evicted beyond it)
   * @param source - the name shown for the input
   */
  constructor(
    readonly limit: number = DEFAULT_LIMIT,
    source = 'stdin',
  ) {
    if (!Number.isInteger(limit) || limit < 1)
      throw new RangeError(`limit must be a positive integer, got ${limit}`);
    this.ring = new Array<LogEntry | undefined>(limit).fill(undefined);
    this.status = { source, phase: 'loading', rotations: 0, skippedBytes: 0 };
  }

  /**
   * Parses and adds lines, evicting the oldest beyond the limit; listeners hear once per batch.
   * @param lines - raw lines, oldest first
   */
  append(lines: readonly string[]): void {
    if (lines.length === 0) return;
    // Only the last `limit` of a large batch can survive: skip parsing the rest.
    const from = Math.max(0, lines.length - this.limit);
    this.nextSeq += from;
    for (let i = from; i < lines.length; i++) {
      const raw = lines[i] as string;
      this.push({ seq: this.nextSeq++, raw, record: parseLogLine(raw) });
    }
    this.changed();
  }

  /**
   * Adds lines already parsed and tagged with their file (several files merged), as `append`.
   * @param lines - lines, oldest first
   */
  appendSourced(lines: readonly Omit<LogEntry, 'seq'>[]): void {
    if (lines.length === 0) return;
    const from = Math.max(0, lines.length - this.limit);
    this.nextSeq += from;
    for (let i = from; i < lines.length; i++)
      this.push({ seq: this.nextSeq++, ...(lines[i] as Omit<LogEntry, 'seq'>) });
    this.changed();
  }

  /**
   * Updates the reader status.
   * @param patch - the fields that changed
   */
  setStatus(patch: Partial<SourceStatus>): void {
    this.status = { ...this.status, ...patch };
    this.changed();
  }

  /** Subscribes to changes (the `subscribe` of `useSyncExternalStore`); returns the unsubscribe. */
  readonly subscribe = (listener: () => void): (() => void) => {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  };

  /** The current snapshot; the same object until the next change (as `useSyncExternalStore` requires). */
  readonly getSnapshot = (): LogStoreSnapshot => {
    this.snapshot ??= {
      entries: this.entries(),
      summary: this.summary(),
      status: this.status,
      limit: this.limit,
      received: this.nextSeq,
    };
    return this.snapshot;
  };

  private push(entry: LogEntry): void {
    const slot = (this.head + this.size) % this.limit;
    if (this.size === this.limit) {
      this.count(this.ring[this.head], -1);
      this.head = (this.head + 1) % this.limit;
    } else {
      this.size++;
    }
    this.ring[slot] = entry;
    this.count(entry, +1);
  }

  /** Adds (`sign` 1) or takes back (`sign` -1) one entry's share of the counts. */
  private count(entry: LogEntry | undefined, sign: 1 | -1): void {
    if (entry === undefined) return;
    const r = entry.record;
    if (r === undefined) {
      this.unparsed += sign;
      return;
    }
    if (!isRequest(r)) return;
    this.requests += sign;
    if (r.status !== undefined && r.status >= 500) this.serverErrors += sign;
    else if (r.status !== undefined && r.status >= 400) this.clientErrors += sign;
    if (r.apiKeyId !== undefined) bump(this.apiKeys, r.apiKeyId, r, sign, true);
    if (r.isValid === undefined) return;
    if (r.route === CONSUME_ROUTE) {
      this.consumes += sign;
      if (!r.isValid) this.consumesRefused += sign;
      return;
    }
    this.verifications += sign;
    if (r.mode === 'test') this.testVerifications += sign;
    if (r.isValid && (r.observed?.length ?? 0) > 0) this.observedVerifications += sign;
    for (const code of new Set(r.isValid ? (r.observed ?? []) : [])) {
      const n = (this.observed.get(code) ?? 0) + sign;
      if (n === 0) this.observed.delete(code);
      else this.observed.set(code, n);
    }
    bump(this.services, r.service ?? 'unknown', r, sign);
    if (r.isValid) return;
    this.rejected += sign;
    const reason = r.reason ?? 'unknown';
    const n = (this.reasons.get(reason) ?? 0) + sign;
    if (n === 0) this.reasons.delete(reason);
    else this.reasons.set(reason, n);
  }

  private changed(): void {
    this.snapshot = undefined;
    for (const l of this.listeners) l();
  }

  private entries(): LogEntry[] {
    const out = new Array<LogEntry>(this.size);
    for (let i = 0; i < this.size; i++)
      out[i] = this.ring[(this.head + i) % this.limit] as LogEntry;
    return out;
  }

  private summary(): LogSummary {
    const byCount = (a: VerifyCounts, b: VerifyCounts) =>
      b.total - a.total || a.name.localeCompare(b.name);
    const counts = (m: Map<string, MutableCounts>) =>
      [...m]
        .map(([name, c]) => ({
          name,
          total: c.total,
          rejected: c.rejected,
          ...(c.mode !== undefined ? { mode: c.mode } : {}),
        }))
        .sort(byCount);
    return {
      lines: this.size,
      unparsed: this.unparsed,
      requests: this.requests,
      verifications: this.verifications,
      rejected: this.rejected,
      consumes: this.consumes,
      consumesRefused: this.consumesRefused,
      observedVerifications: this.observedVerifications,
      testVerifications: this.testVerifications,
      observed: [...this.observed]
        .map(([name, count]) => ({ name, count }))
        .sort((a, b) => b.count - a.count || a.name.localeCompare(b.name)),
      clientErrors: this.clientErrors,
      serverErrors: this.serverErrors,
      reasons: [...this.reasons]
        .map(([name, count]) => ({ name, count }))
        .sort((a, b) => b.count - a.count || a.name.localeCompare(b.name)),
      services: counts(this.services),
      apiKeys: counts(this.apiKeys),
    };
  }
}

/** Adds or takes back one line's count; `withMode`: the key keeps the mode its line names. */
function bump(
  m: Map<string, MutableCounts>,
  key: string,
  r: LogRecord,
  sign: 1 | -1,
  withMode = false,
): void {
  const c: MutableCounts = m.get(key) ?? { total: 0, rejected: 0 };
  c.total += sign;
  if (withMode && sign === 1 && r.mode !== undefined) c.mode = r.mode;
  if (r.isValid === false) c.rejected += sign;
  if (c.total === 0) m.delete(key);
  else m.set(key, c);
}
