// Apart from verificationStats.ts, with no import: the CLI checks its flags against these
// without loading the database drivers.

/** What a verification ended as (`attest stats`). */
export const STATS_OUTCOMES = ['valid', 'rejected', 'observed', 'error'] as const;
export type StatsOutcome = (typeof STATS_OUTCOMES)[number];

/** The dimensions `attest stats --by` sums over. */
export const STATS_DIMENSIONS = ['app', 'reason', 'key', 'service', 'minute'] as const;
export type StatsDimension = (typeof STATS_DIMENSIONS)[number];

/** One counted group: the counts of one minute of one key, mode, service, app, outcome and reason. */
export interface StatsRow {
  /** the start of the minute */
  minute: Date;
  /** '' when the request failed before its key was known */
  apiKeyId: string;
  /** '' with an unknown key */
  mode: 'live' | 'test' | '';
  /** '' when unknown */
  service: string;
  /** '' when unknown */
  app: string;
  outcome: StatsOutcome;
  /** '' for valid and error */
  reason: string;
  count: number;
}

/**
 * What one flush adds, with its identity: the database applies a batch id at most once, so a
 * batch retried after a lost answer counts once (db/verificationStats.ts add).
 */
export interface StatsBatch {
  /** unique per batch across instances and restarts: `<instance id>:<sequence number>` */
  id: string;
  rows: readonly StatsRow[];
}

export interface StatsQuery {
  since: Date;
  until: Date;
  by: StatsDimension;
  app?: string;
  apiKeyId?: string;
  service?: string;
}

/** A sum over the window: the value of the `by` dimension (null: unknown or none), outcome, reason. */
export interface StatsTotal {
  value: string | null;
  outcome: StatsOutcome;
  reason: string | null;
  count: number;
}
