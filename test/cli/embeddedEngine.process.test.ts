/**
 * The embedded PostgreSQL server as a process: it dies with `attest serve` even when attest is
 * killed with SIGKILL; a server left running by a killed attest (its pipe still open, as when
 * the shell did not get to stop it) is found and stopped at the next start, never doubled; and
 * `attest db backup` while requests run stalls none of them past 200 ms (issue 37 item 5: the
 * PGlite engine's backup stalled the API 0.75-3.8 s).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PG_DIR } from '../../src/db/embeddedServer.js';
import {
  baseEnv,
  buildOnce,
  ROOT,
  runBin,
  serveBin,
  stopBin,
  type Served,
} from '../support/binary.js';

function postmasterPid(dataDir: string): number {
  return Number(readFileSync(join(dataDir, PG_DIR, 'postmaster.pid'), 'utf8').split('\n')[0]);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function until(what: string, test: () => boolean, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!test()) {
    if (Date.now() > end) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('the embedded PostgreSQL server as a process', () => {
  let dir: string;
  let env: NodeJS.ProcessEnv;
  let dataDir: string;
  let server: Served | undefined;
  beforeAll(() => {
    buildOnce();
    dir = mkdtempSync(join(tmpdir(), 'attest-engine-'));
    dataDir = join(dir, 'data');
    env = baseEnv({ ATTEST_DATA_DIR: dataDir });
  });
  afterAll(async () => {
    if (server) await stopBin(server);
    rmSync(dir, { recursive: true, force: true });
  });

  it('dies with attest killed by SIGKILL; the next start serves on the same data', async () => {
    server = await serveBin(env);
    const created = await runBin(['keys', 'create', '--name', 'rp', '--json'], env);
    expect(created.code, created.stderr).toBe(0);
    const pid = postmasterPid(dataDir);
    expect(alive(pid)).toBe(true);
    server.child.kill('SIGKILL');
    await server.exited;
    server = undefined;
    // the shell's pipe from attest ended: it asked postgres for a fast shutdown
    await until('the postmaster is gone', () => !alive(pid));
    server = await serveBin(env);
    const list = await runBin(['keys', 'list', '--json'], env);
    expect(JSON.parse(list.stdout)).toHaveLength(1);
    await stopBin(server);
    server = undefined;
    expect(existsSync(join(dataDir, PG_DIR, 'postmaster.pid'))).toBe(false);
  }, 180_000);

  it('a server left running by a killed attest is stopped before a new one starts, never doubled', async () => {
    // an attest that dies while something else keeps its pipe open: a child of this test
    // inherits it, as a server outliving its attest would be left
    const holder = spawn(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `const { openDatabase } = await import(${JSON.stringify(join(ROOT, 'dist/db/client.js'))});
         await openDatabase({ dataDir: ${JSON.stringify(dataDir)}, role: 'cli' });
         process.stdout.write('open\\n');
         setInterval(() => {}, 1000);`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'], env: { ...env }, detached: false },
    );
    holder.stdout!.setEncoding('utf8');
    await new Promise<void>((resolve, reject) => {
      holder.stdout!.on('data', (d: string) => d.includes('open') && resolve());
      holder.once('exit', (code) => reject(new Error(`the holder exited ${code}`)));
    });
    const orphan = postmasterPid(dataDir);
    // its attest is gone (the lock goes stale) but the server lives on: stop the holder with
    // SIGSTOP, so its pipe stays open, and forget its lock
    holder.kill('SIGSTOP');
    rmSync(join(dataDir, 'attest.lock'));
    try {
      expect(alive(orphan)).toBe(true);
      server = await serveBin(env);
      expect(alive(orphan)).toBe(false);
      const now = postmasterPid(dataDir);
      expect(now).not.toBe(orphan);
      const list = await runBin(['keys', 'list', '--json'], env);
      expect(list.code, list.stderr).toBe(0);
    } finally {
      holder.kill('SIGKILL');
    }
  }, 180_000);

  it('a backup while requests run stalls none of them past 200 ms (or past the stalls of as long without one)', async () => {
    server ??= await serveBin(env);
    const created = await runBin(['keys', 'create', '--name', 'load', '--json'], env);
    const key = (JSON.parse(created.stdout) as { key: string }).key;
    const latencies: { at: number; ms: number }[] = [];
    let running = true;
    const loop = async () => {
      while (running) {
        const t = performance.now();
        const res = await fetch(`${server!.url}/api/v1/attestation/init`, {
          method: 'POST',
          headers: { 'X-Api-Key': key },
        });
        await res.arrayBuffer();
        expect(res.status).toBe(200);
        latencies.push({ at: t, ms: performance.now() - t });
      }
    };
    const loops = [loop(), loop(), loop(), loop()];
    await until('requests ran', () => latencies.length >= 200, 60_000);
    const started = performance.now();
    const backup = await runBin(['db', 'backup', join(dir, 'during.tgz'), '--json'], env);
    const ended = performance.now();
    // as long again without a backup: on a loaded machine a longer window sees longer stalls of
    // its own, so the yardstick is the worst of windows as long as the backup's, before and after
    await until('as long again ran', () => performance.now() - ended >= ended - started, 60_000);
    running = false;
    await Promise.all(loops);
    expect(backup.code, backup.stderr).toBe(0);
    const during = latencies.filter((l) => l.at >= started && l.at <= ended);
    expect(during.length).toBeGreaterThan(10);
    const after = latencies.filter((l) => l.at > ended);
    const before = Math.max(
      ...latencies.filter((l) => l.at < started).map((l) => l.ms),
      ...after.map((l) => l.ms),
    );
    const worst = Math.max(...during.map((l) => l.ms));
    // eslint-disable-next-line no-console
    console.log(
      `init latency: max ${before.toFixed(0)} ms without a backup (before and after it), max ${worst.toFixed(0)} ms during it (${during.length} requests in ${(ended - started).toFixed(0)} ms)`,
    );
    // the bound is 200 ms; on a machine so loaded that requests already stall longer without a
    // backup, the backup (pg_dump and gzip: two more busy processes on a saturated machine) may
    // at most double what the machine shows in as long without one: a lock held or a blocked
    // event loop would stall requests for the whole backup, seconds (seen once at 371 against
    // 213 ms with two test suites on the two cores)
    expect(worst).toBeLessThan(Math.max(200, 2 * before));
  }, 180_000);
});
