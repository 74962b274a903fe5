import { sql, type SQL } from 'drizzle-orm';
import { rowsOf, type Database } from './database.js';
import { underPruneLock, type PruneTarget } from './pruneLock.js';
import { fixedStatement } from './fixedStatement.js';
import type {
  DeviceRow,
  RolloutQuery,
  RolloutRule,
  StatsBatch,
  StatsDimension,
  StatsMode,
  StatsOutcome,
  StatsQuery,
  StatsTotal,
} from './statsDimensions.js';

// One statement per batch: the batch's id is recorded and its rows added only if that insert
// happened, so all of them are added or none is, and a batch retried after a commit whose answer
// was lost (a connection reset after the statement ran) adds nothing the second time; two
// instances racing with the same id wait on the id's row and only the first adds. The rows are
// grouped (a key twice in one statement would fail it) and taken in key order, so that instances
// flushing the same keys lock them in the same order instead of deadlocking. JSON: the two
// drivers bind arrays differently.
const ADD = fixedStatement(`
  with batch as (
    insert into verification_stats_batches (id) values ($1)
    on conflict (id) do nothing
    returning id
  )
  insert into verification_stats as s (minute, api_key_id, mode, service, app, outcome, reason, count)
  select minute, api_key_id, mode, service, app, outcome, reason, sum(count)
  from jsonb_to_recordset($2::jsonb) as r(
    minute timestamptz, api_key_id text, mode text, service text, app text, outcome text,
    reason text, count bigint)
  where exists (select 1 from batch)
  group by minute, api_key_id, mode, service, app, outcome, reason
  order by minute, api_key_id, mode, service, app, outcome, reason
  on conflict (minute, api_key_id, mode, service, app, outcome, reason)
  do update set count = s.count + excluded.count`);

// The devices of a batch: an upsert that keeps the latest time per day, so sending a batch again
// (or two instances sending the same device) changes nothing; grouped and ordered as ADD is.
const ADD_DEVICES = fixedStatement(`
  insert into verification_devices as d (day, app, mode, service, device, reason, last_at)
  select day, app, mode, service, device, reason, max(last_at)
  from jsonb_to_recordset($1::jsonb) as r(
    day timestamptz, app text, mode text, service text, device text, reason text,
    last_at timestamptz)
  group by day, app, reason, mode, service, device
  order by day, app, reason, mode, service, device
  on conflict (day, app, reason, mode, service, device)
  do update set last_at = greatest(d.last_at, excluded.last_at)`);

// any constant works; it only has to be the same for every instance (sessions use 'prue')
const PRUNE_LOCK_ID = 0x76737470; // 'vstp'

const COLUMN: Record<StatsDimension, SQL> = {
  app: sql`app`,
  reason: sql`reason`,
  key: sql`api_key_id`,
  service: sql`service`,
  minute: sql`to_char(minute at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')`,
};

/**
 * The rows of `mode` (a stats or devices table, by its alias): live keeps the rows whose key was
 * unknown ('': an outage's 500s), which no test key can have made; all keeps every row.
 */
function modeFilter(column: SQL, mode: StatsMode = 'live'): SQL {
  if (mode === 'all') return sql`true`;
  return mode === 'test' ? sql`${column} = 'test'` : sql`${column} <> 'test'`;
}

/** The fleet's verification counts: added by every instance, summed by `attest stats`. */
export function createVerificationStatsRepository(db: Database) {
  const addDevices = (devices: readonly DeviceRow[]) =>
    ADD_DEVICES(db, [
      JSON.stringify(
        devices.map((d) => ({
          day: d.day.toISOString(),
          app: d.app,
          mode: d.mode,
          service: d.service,
          device: d.device,
          reason: d.reason,
          last_at: d.lastAt.toISOString(),
        })),
      ),
    ]);
  return {
    /**
     * Adds a batch's rows to the stored counts, in one statement (atomic: all or none), at most
     * once per batch id however often it is sent.
     */
    async add(batch: StatsBatch): Promise<void> {
      const rows = batch.rows;
      if (rows.length === 0) {
        if (batch.devices?.length) await addDevices(batch.devices);
        return;
      }
      const json = JSON.stringify(
        rows.map((r) => ({
          minute: r.minute.toISOString(),
          api_key_id: r.apiKeyId,
          mode: r.mode,
          service: r.service,
          app: r.app,
          outcome: r.outcome,
          reason: r.reason,
          count: r.count,
        })),
      );
      await ADD(db, [batch.id, json]);
      if (batch.devices?.length) await addDevices(batch.devices);
    },

    /**
     * Deletes the counts of minutes before `cutoff`; returns how many rows went, or null when
     * `advisoryLock` is set and another instance is pruning (PostgreSQL: the lock is the
     * transaction's, so a crashed pruner never leaves it held).
     */
    async prune(cutoff: Date, options: { advisoryLock?: boolean } = {}): Promise<number | null> {
      const prune = async (tx: PruneTarget) => {
        const rows = rowsOf<{ n: number }>(
          await tx.execute(sql`
            with gone as (
              delete from verification_stats where minute < ${cutoff.toISOString()}::timestamptz
              returning 1
            ), batches as (
              -- a batch is retried within seconds of its first try: its id outlives that by far
              delete from verification_stats_batches where applied_at < ${cutoff.toISOString()}::timestamptz
            ), devices as (
              delete from verification_devices where last_at < ${cutoff.toISOString()}::timestamptz
            ) select count(*)::int as n from gone`),
        );
        return rows[0]?.n ?? 0;
      };
      return underPruneLock(db, PRUNE_LOCK_ID, options, prune);
    },

    /**
     * The counts of the minutes from `since` (its minute included) to `until`, summed by the
     * `by` dimension, outcome and reason: by value (unknown last), outcome, then largest first.
     */
    async totals(query: StatsQuery): Promise<StatsTotal[]> {
      const filters: SQL[] = [
        sql`minute >= date_trunc('minute', ${query.since.toISOString()}::timestamptz)`,
        sql`minute <= ${query.until.toISOString()}::timestamptz`,
      ];
      if (query.app !== undefined) filters.push(sql`app = ${query.app}`);
      if (query.apiKeyId !== undefined) filters.push(sql`api_key_id = ${query.apiKeyId}`);
      if (query.service !== undefined) filters.push(sql`service = ${query.service}`);
      filters.push(modeFilter(sql`mode`, query.mode));
      const column = COLUMN[query.by];
      const rows = rowsOf<{
        value: string;
        mode: string;
        outcome: StatsOutcome;
        reason: string;
        n: string;
      }>(
        await db.execute(sql`
          select ${column} as value, mode, outcome, reason, sum(count)::text as n
          from verification_stats
          where ${sql.join(filters, sql` and `)}
          group by 1, 2, 3, 4
          order by ${column} = '', ${column} collate "C", mode collate "C", outcome,
                   sum(count) desc, reason collate "C"`),
      );
      return rows.map((r) => ({
        value: r.value === '' ? null : r.value,
        mode: r.mode === 'live' || r.mode === 'test' ? r.mode : null,
        outcome: r.outcome,
        reason: r.reason === '' ? null : r.reason,
        count: Number(r.n),
      }));
    },

    /**
     * Each observed rule of each allowlisted app (or of `query.app`): the verifies counted from
     * the minute the rule was last put under observation (the audit trail's time, so counts made
     * before the rule never dilute its share), and how many of the valid ones it failed. The
     * minute of the change itself is counted whole: a verify in its seconds before the change is
     * in `verifies`, not in `wouldReject`.
     */
    async rollout(query: RolloutQuery): Promise<RolloutRule[]> {
      const filters: SQL[] = [sql`v.minute <= ${query.until.toISOString()}::timestamptz`];
      if (query.apiKeyId !== undefined) filters.push(sql`v.api_key_id = ${query.apiKeyId}`);
      if (query.service !== undefined) filters.push(sql`v.service = ${query.service}`);
      const mode = query.mode ?? 'live';
      filters.push(modeFilter(sql`v.mode`, mode));
      const appFilter = query.app === undefined ? sql`true` : sql`app = ${query.app}`;
      // devices of a rule's app seen since it was observed: valid ones (reason '') or the rule's
      // failures; not counted per API key (null)
      const distinctDevices = (reason: SQL) =>
        query.apiKeyId !== undefined
          ? sql`null`
          : sql`(select count(distinct (d.mode, d.service, d.device)) from verification_devices d
              where d.app = s.app and d.reason = ${reason} and d.day >= date_trunc('day', s.since)
                and d.last_at >= s.since and d.last_at <= ${query.until.toISOString()}::timestamptz
                and ${modeFilter(sql`d.mode`, mode)}
                ${query.service === undefined ? sql`` : sql`and d.service = ${query.service}`})::text`;
      const rows = rowsOf<{
        app: string;
        reason: string;
        since: string | Date | null;
        verifies: string;
        valid: string;
        would_reject: string;
        devices: string | null;
        would_reject_devices: string | null;
      }>(
        await db.execute(sql`
          with rules as (
            select 'apple:' || app_id as target, app_id as app, unnest(observe) as reason
            from apple_apps
            union all
            select 'android:' || package_name, package_name, unnest(observe) from android_packages
          ), started as (
            select r.app, r.reason,
              (select max(e.at) from audit_events e
                where e.target = r.target
                  and coalesce(e.after -> 'observe' @> jsonb_build_array(r.reason), false)
                  and not coalesce(e.before -> 'observe' @> jsonb_build_array(r.reason), false)
              ) as since
            from rules r where ${appFilter}
          )
          select s.app, s.reason, s.since,
            ${distinctDevices(sql`''`)} as devices,
            ${distinctDevices(sql`s.reason`)} as would_reject_devices,
            coalesce(sum(v.count) filter (where v.outcome <> 'observed'), 0)::text as verifies,
            coalesce(sum(v.count) filter (where v.outcome = 'valid'), 0)::text as valid,
            coalesce(sum(v.count) filter (where v.outcome = 'observed' and v.reason = s.reason), 0)::text
              as would_reject
          from started s
          left join verification_stats v
            on v.app = s.app and v.minute >= date_trunc('minute', s.since)
               and ${sql.join(filters, sql` and `)}
          group by s.app, s.reason, s.since, devices, would_reject_devices
          order by s.app collate "C", s.reason collate "C"`),
      );
      return rows.map((r) => {
        const valid = Number(r.valid);
        const wouldReject = Number(r.would_reject);
        return {
          app: r.app,
          mode,
          reason: r.reason,
          observedSince: r.since === null ? null : new Date(r.since),
          verifies: Number(r.verifies),
          valid,
          wouldReject,
          share: valid === 0 ? null : wouldReject / valid,
          devices: r.devices === null ? null : Number(r.devices),
          wouldRejectDevices:
            r.would_reject_devices === null ? null : Number(r.would_reject_devices),
        };
      });
    },
  };
}

export type VerificationStatsRepository = ReturnType<typeof createVerificationStatsRepository>;
