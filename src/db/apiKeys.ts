import { sql } from 'drizzle-orm';
import type { KeyMode } from '../core/ports.js';
import { auditColumn, auditCte, logAudit, type Auditor } from './audit.js';
import { auditSummary } from './auditedColumns.js';
import { rowsOf, type Database } from './database.js';
import { parseTextArray, textArray } from './textArray.js';

export interface ApiKeyRow {
  id: string;
  name: string;
  hash: string;
  createdAt: Date;
  lastUsedAt: Date | null;
  expiresAt: Date | null;
  revokedAt: Date | null;
  mode: KeyMode;
  /** valid verifies carry a signed result token */
  resultTokens: boolean;
  /** rejections carry their reason (`rejection: {reason, remediation?}`) */
  rejectionDetails: boolean;
  /** the app IDs and packages the key may verify; null: every allowlisted app */
  apps: string[] | null;
}

interface RawRow {
  id: string;
  name: string;
  hash: string;
  created_at: Date | string;
  last_used_at: Date | string | null;
  expires_at: Date | string | null;
  revoked_at: Date | string | null;
  mode: string;
  result_tokens?: boolean | null;
  rejection_details?: boolean | null;
  precheck?: string | null;
  apps?: string[] | string | null;
}

const date = (v: Date | string | null) => (v === null ? null : new Date(v));
const toRow = (r: RawRow): ApiKeyRow => ({
  id: r.id,
  name: r.name,
  hash: r.hash,
  createdAt: new Date(r.created_at),
  lastUsedAt: date(r.last_used_at),
  expiresAt: date(r.expires_at),
  revokedAt: date(r.revoked_at),
  mode: r.mode === 'test' ? 'test' : 'live',
  resultTokens: r.result_tokens === true,
  rejectionDetails: r.rejection_details === true,
  apps: r.apps === null || r.apps === undefined ? null : parseTextArray(r.apps),
});

/** A scope as stored: sorted and without repeats, so equal scopes compare (and print) the same. */
const normalApps = (apps: readonly string[] | null | undefined): string[] | null =>
  apps === null || apps === undefined ? null : [...new Set(apps)].sort();

/** A scope as a parameter: null stays null (every app), a list is a text[]. */
const appsParam = (apps: readonly string[] | null) =>
  apps === null ? sql`null::text[]` : textArray(apps);

/** How long an address prefix that authenticated a key keeps its own failure budget for it. */
export const ORIGIN_MAX_AGE_DAYS = 30;
/** At most this many prefixes per key are read back (the most recent). */
export const MAX_ORIGINS = 64;

/** API keys: only the argon2id hash of a key is ever stored. */
export function createApiKeyRepository(db: Database) {
  /** Sets an on/off column of a key, audited as `keys.update` with its key before and after when it changes. */
  async function setFlag(
    column: 'result_tokens' | 'rejection_details',
    key: 'resultTokens' | 'rejectionDetails',
    id: string,
    on: boolean,
    auditor?: Auditor,
  ): Promise<{ found: boolean; changed: boolean }> {
    const col = sql.identifier(column);
    const rows = rowsOf<{ id: string; changed: boolean; audit: unknown }>(
      await db.execute(sql`
        with b as (select id from api_keys where id = ${id}),
        u as (
          update api_keys set ${col} = ${on}
          where id = ${id} and ${col} is distinct from ${on} returning id, name
        )${auditCte(
          auditor,
          (actor) => sql`
          select ${actor}, 'keys.update', u.id, jsonb_build_object('name', u.name, ${key}::text, not ${on}::boolean),
                 jsonb_build_object('name', u.name, ${key}::text, ${on}::boolean) from u`,
        )}
        select b.id, exists (select 1 from u) as changed, ${auditColumn(auditor)} as audit from b`),
    );
    if (!rows[0]) return { found: false, changed: false };
    if (rows[0].changed) logAudit(auditor, rows[0].audit);
    return { found: true, changed: rows[0].changed };
  }

  return {
    /** With an auditor, the same statement records `keys.create`. */
    async insert(
      input: {
        id: string;
        name: string;
        hash: string;
        /** the key's pre-check (`apiKeyCheck`); absent: set by its first verification */
        precheck?: string | null;
        expiresInSeconds: number | null;
        mode?: KeyMode;
        resultTokens?: boolean;
        rejectionDetails?: boolean;
        /** app IDs and packages (checked by the caller); absent or null: every allowlisted app */
        apps?: readonly string[] | null;
      },
      auditor?: Auditor,
    ): Promise<ApiKeyRow> {
      const rows = rowsOf<RawRow & { audit: unknown }>(
        await db.execute(sql`
          with k as (
            insert into api_keys (id, name, hash, precheck, mode, result_tokens, rejection_details, apps, expires_at)
            values (${input.id}, ${input.name}, ${input.hash}, ${input.precheck ?? null}, ${input.mode ?? 'live'}, ${input.resultTokens ?? false}, ${input.rejectionDetails ?? false}, ${appsParam(normalApps(input.apps))},
                    ${input.expiresInSeconds === null ? null : sql`now() + make_interval(secs => ${input.expiresInSeconds})`})
            returning *
          )${auditCte(
            auditor,
            (actor) => sql`
            select ${actor}, 'keys.create', k.id, null::jsonb, ${auditSummary('api_keys', sql`k`)} from k`,
          )}
          select k.*, ${auditColumn(auditor)} as audit from k`),
      );
      logAudit(auditor, rows[0]!.audit);
      return toRow(rows[0]!);
    },

    /**
     * The key's row, with its pre-check and the address prefixes that authenticated it within
     * `ORIGIN_MAX_AGE_DAYS` (the most recent `MAX_ORIGINS`), in one statement.
     */
    async find(
      id: string,
    ): Promise<(ApiKeyRow & { precheck: string | null; origins: string[] }) | null> {
      const rows = rowsOf<RawRow & { origins: unknown }>(
        await db.execute(sql`
          select k.*, (select coalesce(jsonb_agg(o.prefix), '[]'::jsonb) from (
                        select prefix from api_key_origins
                        where api_key_id = k.id and last_seen_at > now() - make_interval(days => ${ORIGIN_MAX_AGE_DAYS})
                        order by last_seen_at desc limit ${MAX_ORIGINS}) o) as origins
          from api_keys k where k.id = ${id}`),
      );
      const row = rows[0];
      if (!row) return null;
      const origins = typeof row.origins === 'string' ? JSON.parse(row.origins) : row.origins;
      return {
        ...toRow(row),
        precheck: row.precheck ?? null,
        origins: Array.isArray(origins) ? origins.map(String) : [],
      };
    },

    /**
     * Stores the pre-check of a key verified by argon2 (keys made before pre-checks), only while
     * the row still has the hash it was verified against.
     */
    async setPrecheck(id: string, hash: string, precheck: string): Promise<void> {
      await db.execute(sql`
        update api_keys set precheck = ${precheck}
        where id = ${id} and hash = ${hash} and precheck is distinct from ${precheck}`);
    },

    /** Records that `prefix` authenticated the key just now (one upsert; a key deleted meanwhile is ignored). */
    async rememberOrigin(id: string, prefix: string): Promise<void> {
      await db.execute(sql`
        insert into api_key_origins (api_key_id, prefix) select id, ${prefix} from api_keys where id = ${id}
        on conflict (api_key_id, prefix) do update set last_seen_at = now()`);
    },

    async list(): Promise<ApiKeyRow[]> {
      return rowsOf<RawRow>(
        await db.execute(sql`select * from api_keys order by created_at, id`),
      ).map(toRow);
    },

    /** false when there is no such key or it was already revoked; with an auditor, the same statement records `keys.revoke`. */
    async revoke(id: string, auditor?: Auditor): Promise<boolean> {
      const rows = rowsOf<{ id: string; audit: unknown }>(
        await db.execute(sql`
          with r as (
            update api_keys set revoked_at = now() where id = ${id} and revoked_at is null returning *
          )${auditCte(
            auditor,
            (actor) => sql`
            select ${actor}, 'keys.revoke', r.id, ${auditSummary('api_keys', sql`r`)} || jsonb_build_object('revokedAt', null),
                   ${auditSummary('api_keys', sql`r`)} from r`,
          )}
          select r.id, ${auditColumn(auditor)} as audit from r`),
      );
      if (rows.length === 1) logAudit(auditor, rows[0]!.audit);
      return rows.length === 1;
    },

    /**
     * Turns result tokens on or off for a key: false when there is no such key. With an auditor,
     * the same statement records `keys.update` (before and after), only when the flag changes.
     */
    setResultTokens: (id: string, on: boolean, auditor?: Auditor) =>
      setFlag('result_tokens', 'resultTokens', id, on, auditor),

    /** Turns rejection details on or off for a key, as `setResultTokens` does result tokens. */
    setRejectionDetails: (id: string, on: boolean, auditor?: Auditor) =>
      setFlag('rejection_details', 'rejectionDetails', id, on, auditor),

    /**
     * Sets the apps a key may verify (null: every allowlisted app): false when there is no such
     * key. With an auditor, the same statement records `keys.update` with the scope before and
     * after, only when it changes (the same IDs in another order are no change).
     */
    async setApps(
      id: string,
      apps: readonly string[] | null,
      auditor?: Auditor,
    ): Promise<{ found: boolean; changed: boolean; apps: string[] | null }> {
      const wanted = normalApps(apps);
      const rows = rowsOf<{ id: string; changed: boolean; audit: unknown }>(
        await db.execute(sql`
          with b as (select id, name, apps from api_keys where id = ${id} for update),
          u as (
            update api_keys k set apps = ${appsParam(wanted)}
            from b where k.id = b.id and k.apps is distinct from ${appsParam(wanted)}
            returning k.id, k.name, k.apps, b.apps as before
          )${auditCte(
            auditor,
            (actor) => sql`
            select ${actor}, 'keys.update', u.id, jsonb_build_object('name', u.name, 'apps', to_jsonb(u.before)),
                   jsonb_build_object('name', u.name, 'apps', to_jsonb(u.apps)) from u`,
          )}
          select b.id, exists (select 1 from u) as changed, ${auditColumn(auditor)} as audit from b`),
      );
      if (!rows[0]) return { found: false, changed: false, apps: wanted };
      if (rows[0].changed) logAudit(auditor, rows[0].audit);
      return { found: true, changed: rows[0].changed, apps: wanted };
    },

    /** Whether any key that is not revoked has result tokens on (serve refuses to start without an issuer then). */
    async anyResultTokens(): Promise<boolean> {
      const rows = rowsOf<{ any: boolean }>(
        await db.execute(
          sql`select exists (select 1 from api_keys where result_tokens and revoked_at is null) as any`,
        ),
      );
      return rows[0]?.any === true;
    },

    async touch(id: string): Promise<void> {
      await db.execute(sql`update api_keys set last_used_at = now() where id = ${id}`);
    },
  };
}

export type ApiKeyRepository = ReturnType<typeof createApiKeyRepository>;
