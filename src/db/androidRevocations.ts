import { sql, type SQL } from 'drizzle-orm';
import {
  parseRevocationDocument,
  revocationDocument,
  shippedRevocations,
} from '../core/androidKey/revocationList.js';
import type { RevocationEntry, RevocationList } from '../core/ports.js';
import { auditColumn, auditCte, logAudit, type Auditor } from './audit.js';
import { rowsOf, type Database } from './database.js';

/** The stored status list's provenance. */
export interface RevocationInfo {
  source: string;
  takenAt: Date;
  updatedAt: Date;
  entryCount: number;
  /** why serve's last refresh from the URL failed, and when (null: the last one succeeded, or none ran) */
  lastRefreshError: { message: string; at: Date } | null;
}

/** The longest refresh error kept: one line in `attest status`. */
const MAX_ERROR_CHARS = 500;

const ROW_ID = 'google';

interface InfoRow {
  source: string;
  taken_at: Date | string;
  updated_at: Date | string;
  entry_count: number;
  last_refresh_error: string | null;
  last_refresh_error_at: Date | string | null;
}

const INFO_COLUMNS = sql`source, taken_at, updated_at, entry_count, last_refresh_error, last_refresh_error_at`;

const infoOf = (row: InfoRow): RevocationInfo => ({
  source: row.source,
  takenAt: new Date(row.taken_at),
  updatedAt: new Date(row.updated_at),
  entryCount: Number(row.entry_count),
  lastRefreshError:
    row.last_refresh_error === null
      ? null
      : { message: row.last_refresh_error, at: new Date(row.last_refresh_error_at!) },
});

/**
 * Google's Android attestation status list, one for every instance. A write replaces the list in
 * one statement, and only with a list taken no earlier than the stored one (two instances that
 * refresh at once cannot put an older list back).
 */
export function createRevocationRepository(db: Database) {
  return {
    async info(): Promise<RevocationInfo | null> {
      const rows = rowsOf<InfoRow>(
        await db.execute(sql`select ${INFO_COLUMNS} from android_revocations where id = ${ROW_ID}`),
      );
      return rows[0] ? infoOf(rows[0]) : null;
    },

    async load(): Promise<{ list: RevocationList; info: RevocationInfo } | null> {
      const rows = rowsOf<InfoRow & { entries: unknown }>(
        await db.execute(
          sql`select entries, ${INFO_COLUMNS} from android_revocations where id = ${ROW_ID}`,
        ),
      );
      const row = rows[0];
      if (!row) return null;
      const entries = typeof row.entries === 'string' ? JSON.parse(row.entries) : row.entries;
      return {
        list: parseRevocationDocument({ entries }).list,
        info: infoOf(row),
      };
    },

    /**
     * Stores `entries` as the list, taken at `takenAt` from `source`.
     * @returns false when the stored list was taken later (it stays)
     */
    async replace(
      entries: ReadonlyMap<bigint, RevocationEntry>,
      source: string,
      takenAt: Date,
      auditor?: Auditor,
    ): Promise<boolean> {
      const document = JSON.stringify(revocationDocument(entries).entries);
      const summary = (row: SQL) =>
        sql`jsonb_build_object('source', ${row}.source, 'takenAt', ${row}.taken_at, 'entries', ${row}.entry_count)`;
      const rows = rowsOf<{ id: string; audit: unknown }>(
        await db.execute(sql`
          with b as (select source, taken_at, entry_count from android_revocations where id = ${ROW_ID}),
          r as (
            insert into android_revocations (id, entries, entry_count, source, taken_at, updated_at)
            values (${ROW_ID}, ${document}::jsonb, ${entries.size}, ${source}, ${takenAt.toISOString()}, now())
            on conflict (id) do update set entries = excluded.entries, entry_count = excluded.entry_count,
              source = excluded.source, taken_at = excluded.taken_at, updated_at = now()
            where android_revocations.taken_at <= excluded.taken_at
            returning id, source, taken_at, entry_count
          )
          ${auditCte(
            auditor,
            (actor) =>
              sql`select ${actor}, 'android.revocations.update', 'status list', (select ${summary(sql`b`)} from b), ${summary(sql`r`)} from r`,
          )}
          select r.id, ${auditColumn(auditor)} as audit from r`),
      );
      if (rows[0]) logAudit(auditor, rows[0].audit);
      return rows.length === 1;
    },

    /**
     * Records how serve's last refresh from the URL ended: `error` its reason, null a success
     * (written only when an error was stored, so a healthy hourly refresh writes nothing).
     */
    async recordRefresh(error: string | null): Promise<void> {
      if (error === null)
        await db.execute(
          sql`update android_revocations set last_refresh_error = null, last_refresh_error_at = null
              where id = ${ROW_ID} and last_refresh_error is not null`,
        );
      else
        await db.execute(
          sql`update android_revocations set last_refresh_error = ${error.slice(0, MAX_ERROR_CHARS)}, last_refresh_error_at = now()
              where id = ${ROW_ID}`,
        );
    },

    /** The stored entries as Google's document holds them (JSON), or null: verify-file reads them. */
    async storedEntries(): Promise<unknown> {
      const rows = rowsOf<{ entries: unknown }>(
        await db.execute(sql`select entries from android_revocations where id = ${ROW_ID}`),
      );
      const value = rows[0]?.entries;
      if (value === undefined) return null;
      return typeof value === 'string' ? JSON.parse(value) : value;
    },

    /** Stores the shipped snapshot when the database has no list yet. */
    async seed(): Promise<void> {
      const shipped = shippedRevocations();
      const document = JSON.stringify(revocationDocument(shipped.entries).entries);
      await db.execute(sql`
        insert into android_revocations (id, entries, entry_count, source, taken_at)
        values (${ROW_ID}, ${document}::jsonb, ${shipped.entries.size}, ${`snapshot ${shipped.date}`}, ${new Date(`${shipped.date}T00:00:00Z`).toISOString()})
        on conflict (id) do nothing`);
    },
  };
}

export type RevocationRepository = ReturnType<typeof createRevocationRepository>;

/**
 * The list as the verifier reads it: the stored one, re-checked at most every `ttlMs` (a cheap
 * read of its update time; the entries only when they changed), else the shipped snapshot.
 */
export function createRevocationSource(
  repo: RevocationRepository,
  options: { ttlMs: number; now?: () => number },
): { list(): Promise<RevocationList>; info(): RevocationInfo | null; invalidate(): void } {
  const now = options.now ?? Date.now;
  let cached: { list: RevocationList; info: RevocationInfo | null; at: number } | null = null;
  let loading: Promise<RevocationList> | null = null;
  const reload = async (): Promise<RevocationList> => {
    const info = await repo.info();
    if (cached && info && cached.info?.updatedAt.getTime() === info.updatedAt.getTime()) {
      cached.at = now();
      return cached.list;
    }
    const loaded = info ? await repo.load() : null;
    cached = loaded
      ? { list: loaded.list, info: loaded.info, at: now() }
      : { list: shippedRevocations().list, info: null, at: now() };
    return cached.list;
  };
  return {
    async list() {
      if (cached && now() - cached.at < options.ttlMs) return cached.list;
      loading ??= reload().finally(() => {
        loading = null;
      });
      return loading;
    },
    info: () => cached?.info ?? null,
    /** the next list() re-checks the stored list (after a change made here or announced by NOTIFY) */
    invalidate() {
      if (cached) cached.at = -Infinity;
    },
  };
}
