/**
 * PostgreSQL on a full disk: writes fail with 53100 ("could not extend file ... No space left on
 * device") while reads still pass. The answers carry Retry-After, /readyz answers 503 while writes
 * fail and 200 again once they pass. The full disk is real: a tablespace on a 1 MB tmpfs (mounted
 * as root; skipped where that is not allowed or PostgreSQL is not local), holding the sessions
 * table and, as the database's default, the probe's table.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/client.js';
import type { DatabaseHandle } from '../../src/db/database.js';
import { createWriteHealth } from '../../src/db/writeHealth.js';
import { STATUS_INTERNAL_ERROR } from '../../src/server/errorBody.js';
import { postgresBackend, type TestDatabase } from '../support/databases.js';
import { BASE, createTestService, init, issueKey } from '../support/service.js';

const pg = postgresBackend();

/** A 1 MB tmpfs owned by the local PostgreSQL server's user, or null. */
function tinyDisk(): string | null {
  if (!pg || process.getuid?.() !== 0) return null;
  const host = new URL(process.env.TEST_DATABASE_URL!).hostname;
  if (host !== '127.0.0.1' && host !== 'localhost') return null;
  const user = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
  const group = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
  if (user.status !== 0 || group.status !== 0) return null;
  const dir = mkdtempSync(join(tmpdir(), 'attest-tablespace-'));
  const options = `size=1m,mode=0700,uid=${user.stdout.trim()},gid=${group.stdout.trim()}`;
  if (spawnSync('mount', ['-t', 'tmpfs', '-o', options, 'tmpfs', dir]).status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    return null;
  }
  return dir;
}

const disk = tinyDisk();

describe.skipIf(disk === null)('PostgreSQL with a full disk', () => {
  const space = `attest_tiny_${process.pid}`;
  let db: TestDatabase;
  let admin: postgres.Sql;
  let handle: DatabaseHandle;
  let key: { id: string; key: string };

  beforeAll(async () => {
    db = await pg!.open();
    key = await issueKey(db);
    admin = postgres(db.url!, { max: 1, onnotice: () => {} });
    const name = new URL(db.url!).pathname.slice(1);
    await admin.unsafe(`create tablespace ${space} location '${disk}'`);
    await admin.unsafe(`alter table attestation_sessions set tablespace ${space}`);
    await admin.unsafe(`alter database ${name} set default_tablespace = ${space}`);
    await admin.unsafe(`create table filler (x text) tablespace ${space}`);
    // opened after: its connections take the database's default tablespace
    handle = await openDatabase({ url: db.url!, dataDir: '', role: 'server', poolSize: 2 });
  });
  afterAll(async () => {
    await handle?.close();
    await admin?.end();
    await db?.close();
    const cleanup = postgres(process.env.TEST_DATABASE_URL!, { max: 1, onnotice: () => {} });
    await cleanup.unsafe(`drop tablespace if exists ${space}`).catch(() => {});
    await cleanup.end();
    spawnSync('umount', [disk!]);
    rmSync(disk!, { recursive: true, force: true });
  });

  it('answers 500 with Retry-After, /readyz 503 while writes fail; 200 again once they pass', async () => {
    const writeHealth = createWriteHealth(handle.db, { probeIntervalMs: 100 });
    const service = createTestService(handle, { writeHealth });
    expect((await service.app.request(`${BASE}/readyz`)).status).toBe(200);
    // fill the tablespace to its last page
    for (;;) {
      const failed = await admin
        .unsafe(`insert into filler select repeat('x', 2000) from generate_series(1, 20)`)
        .then(() => null)
        .catch((err: { code?: string }) => err);
      if (failed) {
        expect(failed.code).toBe('53100');
        break;
      }
    }
    const full = await init(service.app, key.key);
    expect(full.res.status).toBe(500);
    expect(full.body).toEqual({
      statusCode: STATUS_INTERNAL_ERROR,
      errorMessage: 'Internal error',
    });
    expect(full.res.headers.get('retry-after')).toBe('5');
    expect(service.logs.last()).toMatchObject({ status: 500, err: { code: '53100' } });
    expect((await service.app.request(`${BASE}/readyz`)).status).toBe(503);
    // still refused by the next probe
    await new Promise((r) => setTimeout(r, 150));
    expect((await service.app.request(`${BASE}/readyz`)).status).toBe(503);

    await admin.unsafe('drop table filler');
    await expect
      .poll(async () => (await service.app.request(`${BASE}/readyz`)).status, {
        timeout: 5000,
        interval: 150,
      })
      .toBe(200);
    expect((await init(service.app, key.key)).res.status).toBe(200);
  }, 60_000);
});
