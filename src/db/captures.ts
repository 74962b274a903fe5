import { randomBytes } from 'node:crypto';
import { sql, type SQL } from 'drizzle-orm';
import { recordAudit, type Auditor, type AuditSummary } from './audit.js';
import { auditSummary } from './auditedColumns.js';
import { androidSummary } from './androidPackageRows.js';
import { rowsOf, type Database } from './database.js';
import { pruneBatch } from './pruneLock.js';
import type { SecretBox } from './secretBox.js';
import { aadFor, MasterKeyError } from './secrets.js';

// the capture pruner's advisory lock (each pruner has its own id)
const PRUNE_LOCK_ID = 0x63617074; // 'capt'

/** Which allowlist table an app's entry lives in (core/kind.ts `entry`), or null: none read. */
export type CaptureEntry = 'apple' | 'android' | null;

/** What one verify leaves for replay (ATTEST_CAPTURE). */
export interface CaptureInput {
  verifiedAt: Date;
  mode: 'live' | 'test';
  apiKeyId: string;
  appScope: readonly string[] | null;
  nonce: Uint8Array;
  service: string | null;
  app: string | null;
  /** the allowlist table of `app`: its entry's summary is kept beside the verdict */
  entry: CaptureEntry;
  valid: boolean;
  reason: string | null;
  detail: string | null;
  checks: unknown;
  token: Uint8Array;
}

/** ATTEST_CAPTURE_MAX: the captures kept per API key mode, and their tokens' bytes. */
export interface CaptureBound {
  count: number;
  bytes: number;
}

/** A capture as `captures list` shows it: everything but the token. */
export interface CaptureSummary {
  id: string;
  verifiedAt: Date;
  mode: 'live' | 'test';
  apiKeyId: string;
  service: string | null;
  app: string | null;
  valid: boolean;
  reason: string | null;
  detail: string | null;
  tokenBytes: number;
}

/** A capture opened for replay: the token, the server's context, and the policy then and now. */
export interface CaptureRecord extends CaptureSummary {
  token: Uint8Array;
  nonce: Uint8Array;
  appScope: string[] | null;
  checks: unknown;
  /** the app's allowlist entry (audit summary) when it was verified, and as it is now */
  policy: AuditSummary | null;
  policyNow: AuditSummary | null;
}

const TABLE = 'token_captures';

/** Ids: 16 lowercase hex digits, made here. */
export const CAPTURE_ID = /^[0-9a-f]{16}$/;

/** The audit summary of `app`'s allowlist entry in `entry`'s table, as a scalar subquery. */
/** The fingerprints of package `p`'s key pairs (live ones, or test-only ones), as a jsonb array. */
function pairsOf(testOnly: boolean): SQL {
  return sql`(select coalesce(jsonb_agg(k.id order by k.created_at, k.id), '[]'::jsonb)
    from android_key_pairs k where k.package_name = p.package_name and k.test_only = ${testOnly})`;
}

function policyOf(entry: SQL, app: SQL): SQL {
  return sql`case ${entry}
    when 'apple' then (select ${auditSummary('apple_apps', sql`a`)} from apple_apps a where a.app_id = ${app})
    when 'android' then (select ${androidSummary(sql`p`, pairsOf(false), pairsOf(true))}
      from android_packages p where p.package_name = ${app})
    else null end`;
}

export function createCaptureRepository(db: Database) {
  return {
    /**
     * Keeps one capture, its token sealed with `box`, and drops the oldest of its mode beyond
     * `bound` (count and token bytes, this one included), in one statement. A token larger than
     * the byte bound is not kept (answers null); otherwise answers the new id and how many went.
     */
    async record(
      capture: CaptureInput,
      box: SecretBox,
      bound: CaptureBound,
    ): Promise<{ id: string; dropped: number } | null> {
      const size = capture.token.length;
      if (size > bound.bytes) return null;
      const id = randomBytes(8).toString('hex');
      const sealed = box.seal(capture.token, aadFor(TABLE, 'token', [id]));
      const rows = rowsOf<{ dropped: number }>(
        await db.execute(sql`
          with inserted as (
            insert into token_captures (id, verified_at, mode, api_key_id, app_scope, nonce, service,
              app, valid, reason, detail, checks, policy, token, token_bytes, master_key_id)
            values (${id}, ${capture.verifiedAt.toISOString()}::timestamptz, ${capture.mode},
              ${capture.apiKeyId}, ${capture.appScope === null ? null : JSON.stringify(capture.appScope)}::jsonb,
              ${Buffer.from(capture.nonce)}, ${capture.service}, ${capture.app}, ${capture.valid},
              ${capture.reason}, ${capture.detail}, ${JSON.stringify(capture.checks)}::jsonb,
              ${policyOf(sql`${capture.entry}::text`, sql`${capture.app}::text`)},
              ${Buffer.from(sealed.ciphertext)}, ${size}, ${sealed.keyId})
            returning 1
          ), ranked as (
            -- the rows before this statement: the new one takes one place and its bytes
            select id, row_number() over w as n, sum(token_bytes) over w as total
            from token_captures where mode = ${capture.mode}
            window w as (order by verified_at desc, id desc)
          ), gone as (
            delete from token_captures t using ranked r
            where t.id = r.id and (r.n >= ${bound.count} or r.total > ${bound.bytes - size})
            returning 1
          ) select (select count(*) from gone)::int as dropped, (select count(*) from inserted)::int as kept`),
      );
      return { id, dropped: rows[0]?.dropped ?? 0 };
    },

    /** Captures newest first, at most `limit`, filtered; never their tokens. */
    async list(filter: {
      mode: 'live' | 'test';
      reason?: string;
      app?: string;
      since?: Date;
      limit: number;
    }): Promise<CaptureSummary[]> {
      const where: SQL[] = [sql`mode = ${filter.mode}`];
      if (filter.reason !== undefined)
        where.push(filter.reason === 'none' ? sql`reason is null` : sql`reason = ${filter.reason}`);
      if (filter.app !== undefined) where.push(sql`app = ${filter.app}`);
      if (filter.since !== undefined)
        where.push(sql`verified_at >= ${filter.since.toISOString()}::timestamptz`);
      const rows = rowsOf<SummaryRow>(
        await db.execute(sql`
          select id, verified_at, mode, api_key_id, service, app, valid, reason, detail, token_bytes
          from token_captures where ${sql.join(where, sql` and `)}
          order by verified_at desc, id desc limit ${filter.limit}`),
      );
      return rows.map(summaryOf);
    },

    /**
     * One capture with its token opened, for `captures get` and `verify-file --capture`; records
     * the audit event `capture.read` (who read which token, and why) in the same transaction.
     * Null when no capture has that id (nothing is recorded then).
     */
    async read(
      id: string,
      box: SecretBox,
      auditor: Auditor,
      purpose: 'get' | 'verify-file',
    ): Promise<CaptureRecord | null> {
      const result = await db.transaction(async (tx) => {
        const t = tx as unknown as Database;
        const rows = rowsOf<
          SummaryRow & {
            token: Uint8Array;
            nonce: Uint8Array;
            app_scope: string[] | null;
            checks: unknown;
            policy: AuditSummary | null;
            policy_now: AuditSummary | null;
            master_key_id: string | null;
          }
        >(
          await t.execute(sql`
            select c.*, ${policyOf(sql`(case when c.service = 'apple' then 'apple' when c.service is null then null else 'android' end)`, sql`c.app`)} as policy_now
            from token_captures c where c.id = ${id}`),
        );
        const row = rows[0];
        if (!row) return null;
        const event = await recordAudit(t, auditor, {
          action: 'capture.read',
          target: `capture:${id}`,
          after: {
            purpose,
            mode: row.mode,
            service: row.service,
            app: row.app,
            reason: row.reason,
          },
        });
        return { row, event };
      });
      if (!result) return null;
      auditor.log(result.event);
      const { row } = result;
      if (row.master_key_id === null)
        throw new MasterKeyError(`capture ${id} is stored in clear: run "attest db migrate"`);
      const token = box.open(
        { keyId: row.master_key_id, ciphertext: new Uint8Array(row.token) },
        aadFor(TABLE, 'token', [id]),
      );
      return {
        ...summaryOf(row),
        token,
        nonce: new Uint8Array(row.nonce),
        appScope: row.app_scope,
        checks: row.checks,
        policy: row.policy,
        policyNow: row.policy_now,
      };
    },

    /**
     * Deletes at most `limit` captures verified before `cutoff` (ATTEST_CAPTURE_RETENTION), under
     * the capture pruner's lock; null when another instance holds it.
     */
    pruneBatch(
      cutoff: Date,
      limit: number,
      options: { advisoryLock?: boolean } = {},
    ): Promise<number | null> {
      return pruneBatch(db, PRUNE_LOCK_ID, options, {
        table: TABLE,
        keys: ['id'],
        where: sql`verified_at < ${cutoff.toISOString()}::timestamptz`,
        limit,
      });
    },
  };
}

export type CaptureRepository = ReturnType<typeof createCaptureRepository>;

interface SummaryRow {
  id: string;
  verified_at: Date | string;
  mode: 'live' | 'test';
  api_key_id: string;
  service: string | null;
  app: string | null;
  valid: boolean;
  reason: string | null;
  detail: string | null;
  token_bytes: number;
}

function summaryOf(row: SummaryRow): CaptureSummary {
  return {
    id: row.id,
    verifiedAt: new Date(row.verified_at),
    mode: row.mode,
    apiKeyId: row.api_key_id,
    service: row.service,
    app: row.app,
    valid: row.valid,
    reason: row.reason,
    detail: row.detail,
    tokenBytes: Number(row.token_bytes),
  };
}
