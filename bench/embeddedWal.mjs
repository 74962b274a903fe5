// The embedded database's WAL under a sustained write load, and what a backup then costs.
// Opens a fresh embedded database (dist/, so `npm run build` first) in a temp dir the way serve
// does (WAL bounds applied, the 10 s checkpoint check running), writes as fast as one loop can
// (per iteration: insert BATCH ~300-byte rows, update them, delete the rows 1,000 older: the
// shape of sessions' lives, batched), and prints pg_wal's size every 10 s. Then: a backup's size, and the longest
// wait of a `select 1` loop while the backup runs (the stall the API would see).
//   node bench/embeddedWal.mjs [seconds=120] [batch=200]
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { sql } from 'drizzle-orm';
import { openDatabase, PG_DIR } from '../dist/db/client.js';

const seconds = Number(process.argv[2] ?? 120);
// rows per iteration: one loop of single-row statements writes too little WAL on a busy machine
const BATCH = Number(process.argv[3] ?? 200);
const dataDir = mkdtempSync(join(tmpdir(), 'attest-walbench-'));
const walDir = join(dataDir, PG_DIR, 'pg_wal');
const walMB = () =>
  readdirSync(walDir)
    .filter((f) => /^[0-9A-F]{24}$/.test(f))
    .reduce((s, f) => s + statSync(join(walDir, f)).size, 0) /
  2 ** 20;
const q = (text) => handle.db.execute(sql.raw(text));
const lsn = async () =>
  Number((await q(`select (pg_current_wal_lsn() - '0/0')::text as b`)).rows[0].b);

const handle = await openDatabase({ dataDir, role: 'server' });
try {
  await q('create table bench_load (id bigserial primary key, v text, used boolean default false)');
  const startLsn = await lsn();
  const start = performance.now();
  let writes = 0;
  let peak = walMB();
  let next = 10;
  console.log(`t=0s pg_wal=${peak.toFixed(0)} MB`);
  while (performance.now() - start < seconds * 1000) {
    const { rows } = await q(
      `insert into bench_load (v) select md5(random()::text) || repeat(md5(random()::text), 8) from generate_series(1, ${BATCH}) returning id`,
    );
    const id = Number(rows[0].id);
    await q(`update bench_load set used = true where id >= ${id}`);
    await q(`delete from bench_load where id < ${id - 1000}`);
    writes++;
    // a server turns its event loop between requests (sockets); PGlite's queries resolve without
    // one, so a bare loop would starve every timer, the 10 s checkpoint check included
    await new Promise((resolve) => setImmediate(resolve));
    const t = (performance.now() - start) / 1000;
    if (t >= next) {
      const mb = walMB();
      peak = Math.max(peak, mb);
      console.log(
        `t=${next}s pg_wal=${mb.toFixed(0)} MB, WAL written ${(((await lsn()) - startLsn) / 2 ** 20) | 0} MB, ${Math.round(writes / t)} iterations/s`,
      );
      next += 10;
    }
  }
  const written = ((await lsn()) - startLsn) / 2 ** 20;
  console.log(
    `load: ${writes} iterations in ${seconds} s (${Math.round(writes / seconds)}/s), WAL written ${written.toFixed(0)} MB, pg_wal peak ${peak.toFixed(0)} MB, now ${walMB().toFixed(0)} MB`,
  );
  let longest = 0;
  let probing = true;
  const probe = (async () => {
    while (probing) {
      const t0 = performance.now();
      await q('select 1');
      longest = Math.max(longest, performance.now() - t0);
      await new Promise((r) => setImmediate(r));
    }
  })();
  const t0 = performance.now();
  const backup = await handle.dump();
  const took = performance.now() - t0;
  probing = false;
  await probe;
  console.log(
    `backup: ${(backup.size / 2 ** 20).toFixed(1)} MB in ${took.toFixed(0)} ms; longest select 1 meanwhile ${longest.toFixed(0)} ms; pg_wal after ${walMB().toFixed(0)} MB`,
  );
} finally {
  await handle.close();
  rmSync(dataDir, { recursive: true, force: true });
}
