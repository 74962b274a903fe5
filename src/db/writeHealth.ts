import { sql } from 'drizzle-orm';
import type { Database } from './database.js';
import { isWriteRefused } from './errors.js';

export interface WriteHealth {
  /** told of every database failure of a write (request or background): a refused write counts */
  observe(err: unknown): void;
  /**
   * false while writes are refused (a full disk, a read-only database): after a refused write,
   * a probe write (at most one per `probeIntervalMs`) decides, and the first that passes clears it
   */
  writable(): Promise<boolean>;
}

/**
 * Whether the database takes writes, for readiness: a full disk or a read-only database fails
 * every write while reads (and so `select 1`) still pass. Judged from the writes that failed, then
 * by probes: a table created and filled in a transaction that is rolled back (its file is new, so
 * its first row must extend it: a full disk or read-only database refuses it; nothing is left).
 */
export function createWriteHealth(
  db: Database,
  options: {
    probeIntervalMs?: number;
    onChange?: (writable: boolean, cause?: unknown) => void;
  } = {},
): WriteHealth {
  const probeIntervalMs = options.probeIntervalMs ?? 1000;
  let refused = false;
  let probedAt = -Infinity;
  let probing: Promise<boolean> | undefined;

  const probe = async (): Promise<boolean> => {
    try {
      await db.transaction(async (tx) => {
        await tx.execute(sql`create table attest_write_probe (filler text)`);
        await tx.execute(sql`insert into attest_write_probe values (repeat('x', 100))`);
        // a rollback by error: drizzle's tx.rollback() throws, so does this, and nothing stays
        throw new ProbeDone();
      });
    } catch (err) {
      if (err instanceof ProbeDone) return true;
      if (isWriteRefused(err)) return false;
      throw err;
    }
    return true;
  };

  return {
    observe(err) {
      if (!isWriteRefused(err) || refused) return;
      refused = true;
      options.onChange?.(false, err);
    },
    async writable() {
      if (!refused) return true;
      if (performance.now() - probedAt < probeIntervalMs) return false;
      probing ??= probe().finally(() => {
        probedAt = performance.now();
        probing = undefined;
      });
      const ok = await probing;
      if (ok && refused) {
        refused = false;
        options.onChange?.(true);
      }
      return ok;
    },
  };
}

class ProbeDone extends Error {}
