import { sql } from 'drizzle-orm';
import type { AppleEnvironment } from '../core/apple/appleTokenDetails.js';
import type { ReceiptFacts } from '../core/apple/receiptStructure.js';
import { rowsOf, type Database } from './database.js';

/** The refresh schedule at a glance: teams with DeviceCheck keys and stored receipts by state. */
export interface ReceiptRefreshSummary {
  /** teams with a DeviceCheck key (`attest apple credentials add`), and those Apple refused */
  teams: number;
  refusedTeams: number;
  /** keys holding a receipt; those that can still be refreshed; those due now; those backing off */
  receipts: number;
  refreshable: number;
  due: number;
  failing: number;
  lastRefreshedAt: Date | null;
  /** keys by the outcome of their last attempt (refreshed, not-modified, ...) */
  outcomes: Record<string, number>;
}

/** A key whose receipt is due for a refresh, claimed by one refresher. */
export interface DueReceipt {
  keyId: Uint8Array;
  appId: string;
  environment: AppleEnvironment;
  receipt: Uint8Array;
  failures: number;
}

/**
 * The receipt refresh schedule, in apple_keys. `claim` is one statement (UPDATE ... WHERE key_id
 * IN (SELECT ... FOR UPDATE SKIP LOCKED) RETURNING) that moves each claimed key's next attempt a
 * lease ahead, so instances sharing a PostgreSQL database never refresh the same key twice.
 * Every instant comes from the caller's clock.
 */
export function createReceiptRefreshQueue(db: Database) {
  const ts = (d: Date) => d.toISOString();
  return {
    /** Where the refresh schedule stands at `now`, for `attest status`: one statement. */
    async summary(now: Date): Promise<ReceiptRefreshSummary> {
      const [row] = rowsOf<{
        teams: number;
        refused_teams: number;
        receipts: number;
        refreshable: number;
        due: number;
        failing: number;
        last_refreshed_at: Date | string | null;
        outcomes: Record<string, number> | string | null;
      }>(
        await db.execute(sql`
          select
            (select count(*)::int from apple_credentials) as teams,
            (select count(*)::int from apple_credentials where rejected_at is not null) as refused_teams,
            count(*)::int as receipts,
            (count(*) filter (where receipt_refreshable and receipt_problem is null))::int as refreshable,
            (count(*) filter (where receipt_refreshable and receipt_problem is null
              and receipt_next_attempt_at <= ${ts(now)}::timestamptz))::int as due,
            (count(*) filter (where receipt_failures > 0))::int as failing,
            max(receipt_refreshed_at) as last_refreshed_at,
            (select jsonb_object_agg(o, n) from (
              select receipt_last_outcome as o, count(*)::int as n from apple_keys
              where receipt_last_outcome is not null group by receipt_last_outcome) g) as outcomes
          from apple_keys where receipt is not null`),
      );
      const outcomes =
        typeof row!.outcomes === 'string' ? JSON.parse(row!.outcomes) : row!.outcomes;
      return {
        teams: Number(row!.teams),
        refusedTeams: Number(row!.refused_teams),
        receipts: Number(row!.receipts),
        refreshable: Number(row!.refreshable),
        due: Number(row!.due),
        failing: Number(row!.failing),
        lastRefreshedAt: row!.last_refreshed_at ? new Date(row!.last_refreshed_at) : null,
        outcomes: Object.fromEntries(
          Object.entries((outcomes ?? {}) as Record<string, unknown>).map(([k, v]) => [
            k,
            Number(v),
          ]),
        ),
      };
    },

    /**
     * Claims up to `limit` due receipts: valid, refreshable, due at `now`, of keys used within
     * `horizonDays`, of teams with a DeviceCheck key.
     */
    async claim(options: {
      now: Date;
      limit: number;
      leaseMs: number;
      horizonDays: number;
    }): Promise<DueReceipt[]> {
      const { now, limit, leaseMs, horizonDays } = options;
      const lease = new Date(now.getTime() + leaseMs);
      const horizon = new Date(now.getTime() - horizonDays * 86_400_000);
      const rows = rowsOf<{
        key_id: Uint8Array;
        app_id: string;
        environment: string;
        receipt: Uint8Array;
        receipt_failures: number;
      }>(
        await db.execute(sql`
          update apple_keys set receipt_next_attempt_at = ${ts(lease)}::timestamptz
          where mode = 'live' and key_id in (
            select k.key_id from apple_keys k
            -- live registrations only: Apple's state is shared by both modes, so a test key's
            -- registration never makes attest call Apple (docs/security.md, test mode)
            where k.mode = 'live' and k.receipt is not null and k.receipt_refreshable and k.receipt_problem is null
              and k.receipt_next_attempt_at <= ${ts(now)}::timestamptz
              and coalesce(k.last_used_at, k.created_at) >= ${ts(horizon)}::timestamptz
              and exists (select 1 from apple_credentials c where c.team_id = split_part(k.app_id, '.', 1))
            order by k.receipt_next_attempt_at
            limit ${limit}
            for update skip locked)
          returning key_id, app_id, environment, receipt, receipt_failures`),
      );
      return rows.map((r) => ({
        keyId: new Uint8Array(r.key_id),
        appId: r.app_id,
        environment: r.environment as AppleEnvironment,
        receipt: new Uint8Array(r.receipt),
        failures: Number(r.receipt_failures),
      }));
    },

    /** Keeps a refreshed (and checked) receipt with its facts; the next refresh at `next`. */
    async stored(keyId: Uint8Array, bytes: Uint8Array, facts: ReceiptFacts, now: Date, next: Date) {
      const time = (d: Date | null) => (d ? ts(d) : null);
      await db.execute(sql`
        update apple_keys set receipt = ${Buffer.from(bytes)}, receipt_problem = null,
          receipt_type = ${facts.type}, receipt_created_at = ${ts(facts.creationTime)}::timestamptz,
          receipt_not_before = ${time(facts.notBefore)}::timestamptz,
          receipt_expires_at = ${time(facts.expirationTime)}::timestamptz,
          risk_metric = ${facts.riskMetric}::integer, receipt_refreshed_at = ${ts(now)}::timestamptz,
          receipt_failures = 0, receipt_next_attempt_at = ${ts(next)}::timestamptz,
          receipt_last_outcome = 'refreshed'
        where key_id = ${Buffer.from(keyId)} and mode = 'live'`);
    },

    /**
     * Records an attempt that kept the receipt: when to try again, what happened, whether the
     * failure count grows (back-off) or restarts, and whether the receipt can be refreshed at all.
     */
    async reschedule(
      keyId: Uint8Array,
      change: {
        next: Date | null;
        outcome: string;
        failures: 'reset' | 'increment' | 'keep';
        refreshable?: boolean;
      },
    ) {
      const failures =
        change.failures === 'reset'
          ? sql`0`
          : change.failures === 'increment'
            ? sql`receipt_failures + 1`
            : sql`receipt_failures`;
      await db.execute(sql`
        update apple_keys set receipt_next_attempt_at = ${change.next ? ts(change.next) : null}::timestamptz,
          receipt_last_outcome = ${change.outcome}, receipt_failures = ${failures},
          receipt_refreshable = ${change.refreshable ?? true}
        where key_id = ${Buffer.from(keyId)} and mode = 'live'`);
    },
  };
}

export type ReceiptRefreshQueue = ReturnType<typeof createReceiptRefreshQueue>;
