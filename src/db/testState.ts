import { sql } from 'drizzle-orm';
import { rowsOf, type Database } from './database.js';
import { underPruneLock, type PruneTarget } from './pruneLock.js';

// the test-state pruner's advisory lock (each pruner has its own id)
const PRUNE_LOCK_ID = 0x74737470; // 'tstp'

/**
 * What test-mode API keys leave behind, which nothing else deletes: a test key mints devices
 * without bound (`attest dev mint`), so every row it makes expires (ATTEST_TEST_RETENTION).
 * Every statement names `mode = 'test'`: a live row is never read, locked or deleted here.
 */
export function createTestStateRepository(db: Database) {
  return {
    /**
     * Deletes at most `limit` test rows of each table last written before `cutoff`, in one
     * statement: App Attest registrations (with their counters) not used since, android-key
     * registrations, android-key assertions, device counts, and the statistics' counts and
     * devices. Answers how many rows went (fewer than `limit`: nothing older is left), or null
     * when `advisoryLock` is set and another instance is pruning.
     */
    async pruneBatch(
      cutoff: Date,
      limit: number,
      options: { advisoryLock?: boolean } = {},
    ): Promise<number | null> {
      const at = cutoff.toISOString();
      const batch = async (tx: PruneTarget) => {
        // each table's victims are picked by its partial index on test rows (or its time
        // index), then deleted by primary key; a test-mode registration with no use since the
        // cutoff goes with its counter (the counter is a column of the row)
        const rows = rowsOf<{ n: number }>(
          await tx.execute(sql`
            with apple as (
              delete from apple_keys k using (
                select key_id from apple_keys
                where mode = 'test' and created_at < ${at}::timestamptz
                  and (last_used_at is null or last_used_at < ${at}::timestamptz)
                limit ${limit}
              ) v where k.key_id = v.key_id and k.mode = 'test' returning 1
            ), android as (
              delete from android_keys k using (
                select key_id from android_keys
                where mode = 'test' and created_at < ${at}::timestamptz limit ${limit}
              ) v where k.key_id = v.key_id and k.mode = 'test' returning 1
            ), assertions as (
              delete from android_key_assertions a using (
                select digest from android_key_assertions
                where mode = 'test' and accepted_at < ${at}::timestamptz limit ${limit}
              ) v where a.digest = v.digest and a.mode = 'test' returning 1
            ), velocity as (
              delete from device_velocity d using (
                select service, key_id from device_velocity
                where mode = 'test' and last_at < ${at}::timestamptz limit ${limit}
              ) v where d.service = v.service and d.key_id = v.key_id and d.mode = 'test'
              returning 1
            ), stats as (
              delete from verification_stats s using (
                select minute, api_key_id, service, app, outcome, reason from verification_stats
                where mode = 'test' and minute < ${at}::timestamptz limit ${limit}
              ) v where s.minute = v.minute and s.api_key_id = v.api_key_id and s.mode = 'test'
                and s.service = v.service and s.app = v.app and s.outcome = v.outcome
                and s.reason = v.reason
              returning 1
            ), devices as (
              delete from verification_devices d using (
                select day, app, reason, service, device from verification_devices
                where mode = 'test' and last_at < ${at}::timestamptz limit ${limit}
              ) v where d.day = v.day and d.app = v.app and d.reason = v.reason
                and d.mode = 'test' and d.service = v.service and d.device = v.device
              returning 1
            ) select ((select count(*) from apple) + (select count(*) from android)
                + (select count(*) from assertions) + (select count(*) from velocity)
                + (select count(*) from stats) + (select count(*) from devices))::int as n`),
        );
        // fewer than `limit` in all: every table had fewer left (the pruner's loop stops)
        return rows[0]?.n ?? 0;
      };
      return underPruneLock(db, PRUNE_LOCK_ID, options, batch);
    },
  };
}

export type TestStateRepository = ReturnType<typeof createTestStateRepository>;
