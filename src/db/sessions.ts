import { sql } from 'drizzle-orm';
import { rowsOf, type Database } from './database.js';
import { pruneBatch } from './pruneLock.js';
import { fixedStatement } from './fixedStatement.js';

// any constant works; it only has to be the same for every instance of attest
const PRUNE_LOCK_ID = 0x70727565; // 'prue'

export type ConsumeResult =
  | { ok: true; serverNonce: Uint8Array }
  | { ok: false; reason: 'session_unknown' | 'session_consumed' | 'session_expired' };

// init and a session's verify run these on every request: fixed texts (fixedStatement.ts)
const CREATE = fixedStatement<{ expires_at: Date | string }>(`
  insert into attestation_sessions (reference, api_key_id, server_nonce, expires_at)
  select $1, $2, $3, now() + make_interval(secs => $4)
  from (select set_config('synchronous_commit', 'off', true)) as async_commit
  returning expires_at`);
const CONSUME = fixedStatement<{
  found: number;
  server_nonce: Uint8Array | null;
  expired: boolean | null;
}>(`
  with target as (
    select reference from attestation_sessions where reference = $1 and api_key_id = $2
  ), consumed as (
    update attestation_sessions s set consumed_at = now()
    from target where s.reference = target.reference and s.consumed_at is null
    returning s.server_nonce, s.expires_at <= now() as expired
  )
  select (select count(*) from target)::int as found, consumed.server_nonce, consumed.expired
  from (select 1) as one left join consumed on true`);

/** Attestation sessions: created by init, consumed exactly once by verify. */
export function createSessionRepository(db: Database) {
  return {
    /**
     * Stores a new session; expiry is computed by the database clock. Its commit does not wait for its WAL flush (synchronous_commit off for this
     * statement's transaction only): a session lost in a crash just fails its verify, closed. The
     * consuming UPDATE commits synchronously, and that flush covers the insert before it, so a
     * consumed session is never forgotten and never reusable.
     */
    async create(input: {
      reference: string;
      apiKeyId: string;
      serverNonce: Uint8Array;
      ttlSeconds: number;
    }): Promise<{ expiresAt: Date }> {
      const rows = await CREATE(db, [
        input.reference,
        input.apiKeyId,
        Buffer.from(input.serverNonce),
        input.ttlSeconds,
      ]);
      return { expiresAt: new Date(rows[0]!.expires_at) };
    },

    /**
     * Consumes the session in one statement: whatever the outcome of the verification that
     * follows, it can never be used again. A session of another API key is reported unknown and
     * left untouched. Concurrent calls: exactly one gets `ok`.
     */
    async consume(reference: string, apiKeyId: string): Promise<ConsumeResult> {
      const rows = await CONSUME(db, [reference, apiKeyId]);
      const row = rows[0];
      if (!row || row.found === 0) return { ok: false, reason: 'session_unknown' };
      if (row.server_nonce === null) return { ok: false, reason: 'session_consumed' };
      if (row.expired) return { ok: false, reason: 'session_expired' };
      return { ok: true, serverNonce: new Uint8Array(row.server_nonce) };
    },

    /** Deletes sessions expired or consumed more than `olderThanSeconds` ago; returns how many. */
    async prune(olderThanSeconds: number): Promise<number> {
      const rows = rowsOf<{ n: number }>(
        await db.execute(sql`
          with gone as (
            delete from attestation_sessions
            where expires_at < now() - make_interval(secs => ${olderThanSeconds})
               or consumed_at < now() - make_interval(secs => ${olderThanSeconds})
            returning 1
          ) select count(*)::int as n from gone`),
      );
      return rows[0]?.n ?? 0;
    },

    /**
     * Deletes at most `limit` sessions that expired or were consumed before `cutoff`; returns how
     * many, or null when `advisoryLock` is set and another instance is pruning (PostgreSQL only:
     * the lock is the transaction's, so a crashed pruner never leaves it held).
     */
    async pruneBatch(
      cutoff: Date,
      limit: number,
      options: { advisoryLock?: boolean } = {},
    ): Promise<number | null> {
      return pruneBatch(db, PRUNE_LOCK_ID, options, {
        table: 'attestation_sessions',
        keys: ['reference'],
        where: sql`expires_at < ${cutoff.toISOString()}::timestamptz or consumed_at < ${cutoff.toISOString()}::timestamptz`,
        limit,
      });
    },

    /** Counts by state, for metrics. */
    async counts(): Promise<{ active: number; consumed: number; expired: number }> {
      const rows = rowsOf<{ active: number; consumed: number; expired: number }>(
        await db.execute(sql`
          select count(*) filter (where consumed_at is null and expires_at > now())::int as active,
                 count(*) filter (where consumed_at is not null)::int as consumed,
                 count(*) filter (where consumed_at is null and expires_at <= now())::int as expired
          from attestation_sessions`),
      );
      return rows[0] ?? { active: 0, consumed: 0, expired: 0 };
    },
  };
}

export type SessionRepository = ReturnType<typeof createSessionRepository>;
