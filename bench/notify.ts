/**
 * How long an allowlist change takes to reach another instance on PostgreSQL: `allowlist add`
 * through instance A (its repository, as the CLI writes), then verify on instance B until valid.
 * Prints the median, p90 and max over the trials.
 *
 *   DATABASE_ADMIN_URL=postgres://postgres@127.0.0.1:5432/postgres npm run bench:notify
 *
 * With POOLER_URL (PgBouncer in transaction mode, e.g. postgres://postgres@127.0.0.1:6432/postgres)
 * the instances connect through it and find that NOTIFY does not arrive: the change feed polls.
 *
 */
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { createAllowlistRepository } from '../src/db/allowlist.js';
import { startInstance, testMinter, verifyOn } from '../test/support/twoInstances.js';

const admin = process.env.DATABASE_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const trials = Number(process.env.NOTIFY_TRIALS ?? 30);
const name = `attest_notify_${randomBytes(4).toString('hex')}`;
const sql = postgres(admin, { max: 1, onnotice: () => {} });
await sql.unsafe(`create database ${name}`);
const url = new URL(process.env.POOLER_URL ?? admin);
url.pathname = `/${name}`;
try {
  // the default fallback interval (5 s): what a deployment runs
  const a = await startInstance(url.toString());
  const b = await startInstance(url.toString());
  const minter = await testMinter(a);
  const allowlist = createAllowlistRepository(a.server.database.db, null);
  const times: number[] = [];
  for (let i = 0; i < trials; i++) {
    const appId = `ABCDE12345.com.example.n${i}`;
    const body = await minter.registration(appId);
    if (await verifyOn(b, minter.key, body)) throw new Error('valid before the allowlist add');
    const start = performance.now();
    await allowlist.addApple(appId, undefined);
    let attempts = 0;
    while (!(await verifyOn(b, minter.key, body))) attempts++;
    times.push(performance.now() - start);
    if (attempts > 1000) throw new Error('never valid');
  }
  times.sort((x, y) => x - y);
  const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))]!;
  console.log(
    `allowlist add on A, then verify on B until valid (${trials} trials, PostgreSQL${process.env.POOLER_URL ? ' behind a pooler' : ''}, change feed ${b.server.database.connections?.feed}): median ${at(0.5).toFixed(1)} ms, p90 ${at(0.9).toFixed(1)} ms, max ${times.at(-1)!.toFixed(1)} ms`,
  );
  await a.server.close();
  await b.server.close();
} finally {
  await sql.unsafe(`drop database if exists ${name} with (force)`);
  await sql.end();
}
