#!/usr/bin/env node
// How long `attest serve` takes from SIGTERM to exit while keep-alive clients send requests back
// to back (GET /readyz, which asks the database): each run starts a server on the embedded
// database, loads it for 2 s, sends SIGTERM and times the exit. Prints the exit code (0: drained;
// the forced exit after 10 s is 1), the time, the answers with Connection: close, and whether
// attest.lock is gone.
//
//   npm run build && node bench/drain.mjs [runs=3] [clients=8]
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';

const BIN = join(import.meta.dirname, '..', 'bin', 'attest.js');
const runs = Number(process.argv[2] ?? 3);
const clients = Number(process.argv[3] ?? 8);

function serve(dataDir) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--host', '127.0.0.1'], {
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        LOG_LEVEL: 'warn',
        ATTEST_DATA_DIR: dataDir,
        ATTEST_ANDROID_REVOCATION_URL: 'off',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d) => {
      stderr += d;
      const m = /attest listening on (http:\/\/\S+)/.exec(stderr);
      if (m) resolve({ child, url: m[1] });
    });
    child.once('exit', (code) => reject(new Error(`exited ${code}: ${stderr}`)));
  });
}

function client(url, tally) {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const once = () =>
    new Promise((resolve) => {
      const req = request(new URL('/readyz', url), { agent }, (res) => {
        res.resume();
        res.once('end', () => {
          tally.answers++;
          if (res.headers.connection === 'close') tally.closing++;
          resolve(true);
        });
      });
      req.once('error', () => resolve(false));
      req.end();
    });
  return (async () => {
    while (await once());
    agent.destroy();
  })();
}

console.log(`runs ${runs}, ${clients} keep-alive clients, load average ${loadavg()[0].toFixed(2)}`);
for (let run = 1; run <= runs; run++) {
  const dir = mkdtempSync(join(tmpdir(), 'attest-drain-bench-'));
  try {
    const { child, url } = await serve(join(dir, 'data'));
    const tally = { answers: 0, closing: 0 };
    const load = Array.from({ length: clients }, () => client(url, tally));
    await new Promise((r) => setTimeout(r, 2000));
    const before = tally.answers;
    const exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
    const t0 = performance.now();
    child.kill('SIGTERM');
    const code = await exited;
    const ms = performance.now() - t0;
    await Promise.all(load);
    console.log(
      `run ${run}: exit ${code} ${ms.toFixed(0)} ms after SIGTERM; ${before} answers in 2 s of load, ` +
        `${tally.answers - before} after SIGTERM (${tally.closing} with Connection: close); ` +
        `lock ${existsSync(join(dir, 'data', 'attest.lock')) ? 'LEFT BEHIND' : 'gone'}`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
