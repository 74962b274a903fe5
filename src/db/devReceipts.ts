import { sql } from 'drizzle-orm';
import type { ReceiptFacts } from '../core/apple/receiptStructure.js';
import { rowsOf, type Database } from './database.js';

/** What became of a development receipt's store: kept, or why not (the key's mode decides). */
export type DevReceiptStoreOutcome = 'stored' | 'live' | 'unknown';

/**
 * Receipts made with the development CA (`attest dev receipts refresh`), kept with test-mode App
 * Attest keys only.
 */
export function createDevReceiptStore(db: Database) {
  const ts = (d: Date | null) => (d ? d.toISOString() : null);
  return {
    /**
     * Keeps `bytes` (a checked refreshed receipt) and its facts, risk metric included, as the
     * key's receipt: one UPDATE that requires the key to be test-mode, so a key that is (or became)
     * live is never given one. The receipt is marked not refreshable: Apple would refuse it.
     */
    async store(
      keyId: Uint8Array,
      bytes: Uint8Array,
      facts: ReceiptFacts,
      now: Date,
    ): Promise<DevReceiptStoreOutcome> {
      const rows = rowsOf<{ mode: string; stored: boolean }>(
        await db.execute(sql`
          with u as (
            update apple_keys set receipt = ${Buffer.from(bytes)}, receipt_problem = null,
              receipt_type = ${facts.type}, receipt_created_at = ${ts(facts.creationTime)}::timestamptz,
              receipt_not_before = ${ts(facts.notBefore)}::timestamptz,
              receipt_expires_at = ${ts(facts.expirationTime)}::timestamptz,
              risk_metric = ${facts.riskMetric}::integer, receipt_refreshed_at = ${ts(now)}::timestamptz,
              receipt_failures = 0, receipt_next_attempt_at = null, receipt_refreshable = false,
              receipt_last_outcome = 'dev-refreshed'
            where key_id = ${Buffer.from(keyId)} and mode = 'test'
            returning key_id)
          select k.mode, exists (select 1 from u) as stored
          from apple_keys k where k.key_id = ${Buffer.from(keyId)}
          order by k.mode = 'test' desc limit 1`),
      );
      const row = rows[0];
      if (!row) return 'unknown';
      return row.stored === true || String(row.stored) === 'true' ? 'stored' : 'live';
    },
  };
}

export type DevReceiptStore = ReturnType<typeof createDevReceiptStore>;
