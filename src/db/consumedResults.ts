import { sql } from 'drizzle-orm';
import type { Database } from './database.js';
import { pruneBatch } from './pruneLock.js';
import { fixedStatement } from './fixedStatement.js';

// any constant works; it only has to be the same for every instance of attest (sessions use 'prue')
const PRUNE_LOCK_ID = 0x70727263; // 'prrc'

// every consume runs it: a fixed text (fixedStatement.ts). Its commit is synchronous (the default):
// a consumption a crash forgot would let the token be consumed a second time.
const RECORD = fixedStatement<{ one: number }>(`
  insert into consumed_results (jti, expires_at, api_key_id)
  values ($1, to_timestamp($2), $3)
  on conflict (jti) do nothing
  returning 1 as one`);

/** Result tokens consumed once (`POST /api/v1/results/consume`), by their `jti`. */
export function createConsumedResultRepository(db: Database) {
  return {
    /**
     * Records `jti` in one statement: true the first time it is recorded, false every later time,
     * on any instance. Concurrent calls: exactly one gets true (the others wait for its commit,
     * then find the row).
     * @param expiresAt the token's `exp`, seconds since the epoch
     */
    async record(jti: string, expiresAt: number, apiKeyId: string): Promise<boolean> {
      const rows = await RECORD(db, [jti, expiresAt, apiKeyId]);
      return rows.length === 1;
    },

    /**
     * Deletes at most `limit` records of tokens that expired before `cutoff`; returns how many, or
     * null when `advisoryLock` is set and another instance is pruning (PostgreSQL only, as for
     * sessions: the lock is the transaction's).
     */
    async pruneBatch(
      cutoff: Date,
      limit: number,
      options: { advisoryLock?: boolean } = {},
    ): Promise<number | null> {
      return pruneBatch(db, PRUNE_LOCK_ID, options, {
        table: 'consumed_results',
        keys: ['jti'],
        where: sql`expires_at < ${cutoff.toISOString()}::timestamptz`,
        limit,
      });
    },
  };
}

export type ConsumedResultRepository = ReturnType<typeof createConsumedResultRepository>;
