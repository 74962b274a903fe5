import { sql } from 'drizzle-orm';
import { auditColumn, auditCte, logAudit, type Auditor } from './audit.js';
import { dateOf } from './appleKeys.js';
import { rowsOf, type Database } from './database.js';

/** One blocked issuing certificate. */
export interface IssuerBlock {
  serial: string;
  createdAt: Date;
}

/**
 * The blocklist of issuing-certificate serials. A block and an unblock are each one statement
 * that also records its audit event (`android_issuers.block`, `android_issuers.unblock`), so the
 * change and its record commit together; a block of a serial already blocked changes nothing and
 * records nothing. `serials()` is what the verifier reads (through a short cache).
 * @param serial normalized (normalizeSerial)
 */
export function createIssuerBlockRepository(db: Database) {
  return {
    async block(serial: string, auditor?: Auditor): Promise<boolean> {
      const rows = rowsOf<{ changed: boolean; audit: unknown }>(
        await db.execute(sql`
          with b as (
            insert into android_issuer_blocks (serial) values (${serial})
            on conflict (serial) do nothing returning serial
          )${auditCte(
            auditor,
            (actor) =>
              sql`select ${actor}, 'android_issuers.block', serial, null::jsonb, jsonb_build_object('serial', serial) from b`,
          )}
          select exists (select 1 from b) as changed, ${auditColumn(auditor)} as audit`),
      );
      logAudit(auditor, rows[0]?.audit);
      return rows[0]?.changed === true;
    },

    async unblock(serial: string, auditor?: Auditor): Promise<boolean> {
      const rows = rowsOf<{ changed: boolean; audit: unknown }>(
        await db.execute(sql`
          with b as (delete from android_issuer_blocks where serial = ${serial} returning serial)${auditCte(
            auditor,
            (actor) =>
              sql`select ${actor}, 'android_issuers.unblock', serial, jsonb_build_object('serial', serial), null::jsonb from b`,
          )}
          select exists (select 1 from b) as changed, ${auditColumn(auditor)} as audit`),
      );
      logAudit(auditor, rows[0]?.audit);
      return rows[0]?.changed === true;
    },

    async list(): Promise<IssuerBlock[]> {
      const rows = rowsOf<{ serial: string; created_at: Date | string }>(
        await db.execute(
          sql`select serial, created_at from android_issuer_blocks order by created_at, serial`,
        ),
      );
      return rows.map((r) => ({ serial: r.serial, createdAt: dateOf(r.created_at)! }));
    },

    async serials(): Promise<ReadonlySet<string>> {
      const rows = rowsOf<{ serial: string }>(
        await db.execute(sql`select serial from android_issuer_blocks`),
      );
      return new Set(rows.map((r) => r.serial));
    },
  };
}

/**
 * The blocked serials as the verifier reads them: from the database at most every `ttlMs`
 * (the propagation time of every other change), one read shared by concurrent registrations.
 */
export function cachedIssuerBlocks(
  repo: { serials(): Promise<ReadonlySet<string>> },
  options: { ttlMs: number; now?: () => number },
): () => Promise<ReadonlySet<string>> {
  const now = options.now ?? Date.now;
  let cached: { at: number; value: Promise<ReadonlySet<string>> } | undefined;
  return () => {
    const at = now();
    if (!cached || at - cached.at >= options.ttlMs) {
      const value = repo.serials();
      const entry = { at, value };
      cached = entry;
      // a failed read is not kept: the next registration asks again
      value.catch(() => {
        if (cached === entry) cached = undefined;
      });
    }
    return cached.value;
  };
}
