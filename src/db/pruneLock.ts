import { sql, type SQL } from 'drizzle-orm';
import { rowsOf, type Database } from './database.js';

/** What a prune runs in: the database itself, or the transaction that holds the lock. */
export type PruneTarget = Pick<Database, 'execute'>;

/**
 * Runs one prune step, alone across instances when `advisoryLock` is set (PostgreSQL): it takes
 * `lockId` as a transaction-level advisory lock, so a crashed pruner never leaves it held, and
 * answers null without pruning when another instance holds it. PGlite has one owner process and
 * needs no lock. Each table prunes under its own id, so one table's pruner never skips another's.
 */
export async function underPruneLock<T>(
  db: Database,
  lockId: number,
  options: { advisoryLock?: boolean },
  prune: (target: PruneTarget) => Promise<T>,
): Promise<T | null> {
  if (!options.advisoryLock) return prune(db);
  return db.transaction(async (tx) => {
    const locked = rowsOf<{ locked: boolean }>(
      await tx.execute(sql`select pg_try_advisory_xact_lock(${lockId}) as locked`),
    );
    return locked[0]?.locked ? prune(tx) : null;
  });
}

/**
 * One prune batch: deletes at most `limit` rows of `table` that `where` selects, found by their
 * key columns, under the table's prune lock (underPruneLock); returns how many, or null when
 * another instance holds the lock. One statement: the victims are chosen and deleted together.
 */
export function pruneBatch(
  db: Database,
  lockId: number,
  options: { advisoryLock?: boolean },
  batch: { table: string; keys: readonly string[]; where: SQL; limit: number },
): Promise<number | null> {
  const table = sql.identifier(batch.table);
  const keys = sql.join(
    batch.keys.map((k) => sql.identifier(k)),
    sql`, `,
  );
  const match = sql.join(
    batch.keys.map((k) => sql`t.${sql.identifier(k)} = victims.${sql.identifier(k)}`),
    sql` and `,
  );
  return underPruneLock(db, lockId, options, async (tx) => {
    const rows = rowsOf<{ n: number }>(
      await tx.execute(sql`
        with victims as (
          select ${keys} from ${table} where ${batch.where} limit ${batch.limit}
        ), gone as (
          delete from ${table} t using victims where ${match} returning 1
        ) select count(*)::int as n from gone`),
    );
    return rows[0]?.n ?? 0;
  });
}
