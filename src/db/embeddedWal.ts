/**
 * Keeps the embedded database's write-ahead log bounded. PGlite runs PostgreSQL as a single-user
 * backend, which differs from a server in three ways that together let pg_wal grow without end:
 *
 * - it never reads `pgdata/postgresql.conf` (nor `postgresql.auto.conf`, nor `-c` arguments):
 *   `SHOW max_wal_size` says 1GB whatever the file says, so the settings are applied here, at
 *   each start, through PostgreSQL's own SetConfigOption (as a command-line setting would be);
 * - it has no checkpointer process, and a standalone backend never requests a checkpoint when
 *   the WAL passes max_wal_size (only a backend under a postmaster does): a checkpoint is run
 *   here when the WAL written since the last one passes CHECKPOINT_AFTER_BYTES;
 * - a checkpoint keeps old segments as renamed "future" ones up to max_wal_size (recycling),
 *   which a backup then carries: with `wal_recycle = off` they are deleted instead (a new 1 MB
 *   segment is made when needed, which costs next to nothing at this write rate).
 *
 * Nor does it run autovacuum: rows that a verify updated or the pruner deleted would stay dead
 * and the tables (and every backup) would grow with the traffic ever served. A plain VACUUM runs
 * before each of these checkpoints, so the space of dead rows is reused.
 */
import type { PGlite } from '@electric-sql/pglite';

/** PGlite's own intended bounds (what its postgresql.conf says), now actually applied. */
export const EMBEDDED_WAL_SETTINGS = {
  max_wal_size: '64MB',
  min_wal_size: '5MB',
  wal_recycle: 'off',
} as const;

/** A checkpoint is run once this much WAL was written since the last one. */
export const CHECKPOINT_AFTER_BYTES = 16 * 1024 * 1024;

/** How often the WAL written since the last checkpoint is looked at (one cheap query). */
const CHECK_EVERY_MS = 10_000;

// PostgreSQL's enums (utils/guc.h): GucContext PGC_SIGHUP, GucSource PGC_S_ARGV
const PGC_SIGHUP = 2;
const PGC_S_ARGV = 4;

interface PgliteModule {
  _SetConfigOption(name: number, value: number, context: number, source: number): void;
  stringToNewUTF8(s: string): number;
  _free(ptr: number): void;
}

/**
 * Applies EMBEDDED_WAL_SETTINGS to an open PGlite (call it right after `PGlite.create`, before
 * any statement). Throws when this PGlite build does not export SetConfigOption.
 */
export function applyEmbeddedWalSettings(pglite: PGlite): void {
  const mod = pglite.Module as unknown as Partial<PgliteModule>;
  if (
    typeof mod._SetConfigOption !== 'function' ||
    typeof mod.stringToNewUTF8 !== 'function' ||
    typeof mod._free !== 'function'
  )
    throw new Error('this PGlite build does not export SetConfigOption: the WAL cannot be bounded');
  for (const [name, value] of Object.entries(EMBEDDED_WAL_SETTINGS)) {
    const n = mod.stringToNewUTF8(name);
    const v = mod.stringToNewUTF8(value);
    try {
      // the values are constants PostgreSQL accepts: no error (and no longjmp) can come of it
      mod._SetConfigOption(n, v, PGC_SIGHUP, PGC_S_ARGV);
    } finally {
      mod._free(n);
      mod._free(v);
    }
  }
}

/** Bytes of WAL written since the last checkpoint's redo point. */
export async function walSinceCheckpoint(pglite: PGlite): Promise<number> {
  const { rows } = await pglite.query<{ behind: string }>(
    'select (pg_current_wal_lsn() - redo_lsn)::text as behind from pg_control_checkpoint()',
  );
  return Number(rows[0]!.behind);
}

/** What autovacuum and the checkpointer would do on a server: dead rows reusable, old WAL gone. */
export async function maintainEmbedded(pglite: PGlite): Promise<void> {
  await pglite.exec('VACUUM');
  await pglite.exec('CHECKPOINT');
}

/** Vacuums and checkpoints when CHECKPOINT_AFTER_BYTES of WAL were written since the last checkpoint. */
export async function checkpointIfDue(pglite: PGlite): Promise<boolean> {
  if ((await walSinceCheckpoint(pglite)) < CHECKPOINT_AFTER_BYTES) return false;
  await maintainEmbedded(pglite);
  return true;
}

/**
 * Looks every 10 s whether a checkpoint is due (see checkpointIfDue); `stop` ends it and waits
 * for a check under way. Failures go to `onError` and the next tick tries again.
 */
export function startEmbeddedCheckpoints(
  pglite: PGlite,
  onError: (err: unknown) => void = () => {},
): { stop(): Promise<void> } {
  let running: Promise<unknown> | undefined;
  const timer = setInterval(() => {
    if (running || pglite.closed) return;
    running = checkpointIfDue(pglite)
      .catch(onError)
      .finally(() => (running = undefined));
  }, CHECK_EVERY_MS);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
