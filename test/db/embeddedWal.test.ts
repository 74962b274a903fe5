/**
 * The embedded database's WAL stays bounded: PGlite reads no postgresql.conf, so the bounds are
 * applied at open (SHOW says so), a checkpoint comes once 16 MB of WAL were written (a
 * single-user backend never requests one itself), and a checkpoint deletes the segments before it
 * rather than keeping them, so a backup carries only the live WAL. The loads write random hex, so
 * kept segments would not compress away.
 */
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { sql } from 'drizzle-orm';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase, PG_DIR } from '../../src/db/client.js';
import {
  applyEmbeddedWalSettings,
  CHECKPOINT_AFTER_BYTES,
  checkpointIfDue,
  maintainEmbedded,
  walSinceCheckpoint,
} from '../../src/db/embeddedWal.js';

const MB = 1024 * 1024;
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'attest-wal-'));
  dirs.push(dir);
  return dir;
}

/** Bytes of WAL segments in a PostgreSQL data directory. */
function walBytes(pgdata: string): number {
  const dir = join(pgdata, 'pg_wal');
  return readdirSync(dir)
    .filter((f) => /^[0-9A-F]{24}$/.test(f))
    .reduce((sum, f) => sum + statSync(join(dir, f)).size, 0);
}

// ~4.5 MB of WAL per statement, cheaply (the size of pg_wal is all that counts there)
const CHEAP_LOAD =
  "insert into wal_load (v) select repeat('x', 1000) from generate_series(1, 4000)";
// about 2.5 MB of WAL per statement that gzip cannot shrink: 2,000 rows of 1 KB of random hex
const LOAD =
  "insert into wal_load (v) select string_agg(md5(random()::text), '') from generate_series(1, 32) g, generate_series(1, 2000) r group by r";

describe('the embedded WAL', () => {
  it('has its bounds applied at open: SHOW max_wal_size says 64MB, wal_recycle off', async () => {
    const handle = await openDatabase({ dataDir: tempDir(), role: 'cli' });
    try {
      const rows = async (name: string) =>
        (
          (await handle.db.execute(sql.raw(`SHOW ${name}`))) as unknown as {
            rows: Record<string, string>[];
          }
        ).rows[0]![name];
      expect(await rows('max_wal_size')).toBe('64MB');
      expect(await rows('min_wal_size')).toBe('5MB');
      expect(await rows('wal_recycle')).toBe('off');
    } finally {
      await handle.close();
    }
  });

  it('stays under 32 MB through ~60 MB of writes, and a checkpoint leaves about one segment', async () => {
    const pgdata = tempDir();
    const pglite = await PGlite.create({ dataDir: pgdata });
    try {
      applyEmbeddedWalSettings(pglite);
      await pglite.exec('create table wal_load (id serial primary key, v text)');
      let checkpoints = 0;
      let peak = 0;
      for (let i = 0; i < 14; i++) {
        await pglite.exec(CHEAP_LOAD);
        await pglite.exec('delete from wal_load');
        // what the 10 s timer does in serve
        if (await checkpointIfDue(pglite)) checkpoints++;
        peak = Math.max(peak, walBytes(pgdata));
        expect(await walSinceCheckpoint(pglite)).toBeLessThan(CHECKPOINT_AFTER_BYTES);
      }
      expect(checkpoints).toBeGreaterThanOrEqual(2); // ~60 MB of WAL, 16 MB apart
      expect(peak).toBeLessThan(32 * MB);
      await pglite.exec('CHECKPOINT');
      expect(walBytes(pgdata)).toBeLessThanOrEqual(3 * MB);
    } finally {
      await pglite.close();
    }
  });

  it('a backup after a load holds the live data, not the WAL the load wrote', async () => {
    const dataDir = tempDir();
    const handle = await openDatabase({ dataDir, role: 'cli' });
    try {
      await handle.db.execute(sql.raw('create table wal_load (id serial primary key, v text)'));
      for (let i = 0; i < 6; i++) {
        await handle.db.execute(sql.raw(LOAD));
        await handle.db.execute(sql.raw('delete from wal_load'));
      }
      await handle.db.execute(sql.raw('vacuum wal_load'));
      const backup = await handle.dump!();
      // the live data is about a fresh database; the ~15 MB of random-hex WAL the load wrote
      // would gzip to more than 7 MB
      expect(backup.size).toBeLessThan(4 * MB);
      expect(walBytes(join(dataDir, PG_DIR))).toBeLessThanOrEqual(3 * MB);
    } finally {
      await handle.close();
    }
  });

  it('reuses the space of deleted rows (PGlite has no autovacuum): churn does not grow a table', async () => {
    const pglite = await PGlite.create({ dataDir: tempDir() });
    try {
      applyEmbeddedWalSettings(pglite);
      await pglite.exec('create table wal_load (id serial primary key, v text)');
      const size = async () =>
        Number(
          (await pglite.query<{ n: string }>("select pg_relation_size('wal_load')::text as n"))
            .rows[0]!.n,
        );
      const churn = async () => {
        await pglite.exec(CHEAP_LOAD);
        await pglite.exec('delete from wal_load');
        await maintainEmbedded(pglite);
      };
      await churn();
      const first = await size();
      for (let i = 0; i < 3; i++) await churn();
      // without the vacuum each round would add its 4,000 dead rows' pages (4x the first size)
      expect(await size()).toBeLessThanOrEqual(first);
    } finally {
      await pglite.close();
    }
  });
});
