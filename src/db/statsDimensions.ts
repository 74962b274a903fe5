// Apart from verificationStats.ts, with no import: the CLI checks its flags against these
// without loading the database drivers.

/** What a verification ended as (`attest stats`). */
export const STATS_OUTCOMES = ['valid', 'rejected', 'observed', 'error'] as const;
export type StatsOutcome = (typeof STATS_OUTCOMES)[number];

/** The dimensions `attest stats --by` sums over. */
export const STATS_DIMENSIONS = ['app', 'reason', 'key', 'service', 'minute'] as const;
export type StatsDimension = (typeof STATS_DIMENSIONS)[number];

/**
 * Whose traffic a figure counts (`--mode`): live keys (the default: a test key's verifies never
 * change a live figure), test keys (a rehearsal), or both. Counts whose key was never known (a
 * 500 before the key was read) are live's: they are no test key's rehearsal.
 */
export const STATS_MODES = ['live', 'test', 'all'] as const;
export type StatsMode = (typeof STATS_MODES)[number];

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
 * A device seen in a day (valid verifies and the observed rules they failed), for the rollout's
 * distinct-device counts (db/deviceStatsSchema.ts).
 */
export interface DeviceRow {
  /** the start of the UTC day */
  day: Date;
  app: string;
  mode: 'live' | 'test' | '';
  service: string;
  /** 32 hex digits: SHA-256 of the service and the evidence's key id, cut */
  device: string;
  /** '' for a valid verify; the observed rule's reason code it failed */
  reason: string;
  /** the last time it was seen that day */
  lastAt: Date;
}

/**
 * What one flush adds, with its identity: the database applies a batch id at most once, so a
 * batch retried after a lost answer counts once (db/verificationStats.ts add).
 */
export interface StatsBatch {
  /** unique per batch across instances and restarts: `<instance id>:<sequence number>` */
  id: string;
  rows: readonly StatsRow[];
  /** devices seen (an idempotent upsert: sent again, they change nothing) */
  devices?: readonly DeviceRow[];
}

export interface StatsQuery {
  since: Date;
  until: Date;
  by: StatsDimension;
  app?: string;
  apiKeyId?: string;
  service?: string;
  /** default live */
  mode?: StatsMode;
}

/**
 * A sum over the window: the value of the `by` dimension (null: unknown or none), the key mode
 * (null: the key was not known), outcome, reason.
 */
export interface StatsTotal {
  value: string | null;
  mode: 'live' | 'test' | null;
  outcome: StatsOutcome;
  reason: string | null;
  count: number;
}

/**
 * One observed rule of an allowlisted app, counted from the minute it was last put under
 * observation (`allowlist add --observe`, read from the audit trail) to `until`.
 */
export interface RolloutRule {
  app: string;
  /** the key mode whose verifies were counted (the query's) */
  mode: StatsMode;
  /** the observed reason code */
  reason: string;
  /** when the rule was put under observation (null: the trail has no such event) */
  observedSince: Date | null;
  /** verifies of the app answered since then: valid, rejected and errors */
  verifies: number;
  /** of them, valid (observed rules do not reject) */
  valid: number;
  /** valid verifies this rule failed: what enforcing it would have turned away */
  wouldReject: number;
  /** wouldReject / valid (null when nothing was valid) */
  share: number | null;
  /**
   * distinct devices with a valid verify since the rule was observed (by day: the rule's first
   * day counts the devices seen after it was observed), and of them, those that failed the rule;
   * only evidence that names a device counts (App Attest and android-key keys, not Play
   * Integrity); null when the query is for one API key (devices are not counted per key)
   */
  devices: number | null;
  wouldRejectDevices: number | null;
}

export interface RolloutQuery {
  until: Date;
  app?: string;
  apiKeyId?: string;
  service?: string;
  /** default live */
  mode?: StatsMode;
}
