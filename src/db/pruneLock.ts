import { sql } from 'drizzle-orm';
import { rowsOf, type Database } from './client.js';

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
