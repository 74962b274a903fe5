#!/usr/bin/env node
// How long `attest serve` takes to listen on the embedded database: a first start (fresh data
// dir) and a restart (same dir), each run in a new process. Wall time is what a user waits;
// CPU time (the process's user+sys when it listens, from /proc) is what the machine's load
// cannot inflate, so the two together say whether a slow figure is ours or the machine's.
//
//   npm run build && node bench/startup.mjs [runs=3]
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';

const BIN = join(import.meta.dirname, '..', 'bin', 'attest.js');
const runs = Number(process.argv[2] ?? 3);
const TICKS = 100; // USER_HZ on Linux

/** utime+stime of a live process in ms, or NaN off Linux */
function cpuMs(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS;
  } catch {
    return Number.NaN;
  }
}

function start(dataDir) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--host', '127.0.0.1'], {
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        ATTEST_DATA_DIR: dataDir,
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    const marks = {};
    let stderr = '';
    child.stderr.on('data', (d) => {
      stderr += d;
      const at = Math.round(performance.now() - t0);
      if (!marks.creating && stderr.includes('creating the embedded database')) marks.creating = at;
      if (!marks.migrating && /applying \d+ migration/.test(stderr)) marks.migrating = at;
      if (!marks.listening && stderr.includes('attest listening on')) {
        marks.listening = at;
        marks.cpu = cpuMs(child.pid);
        child.kill('SIGTERM');
      }
    });
    child.on('exit', (code) =>
      marks.listening ? resolve(marks) : reject(new Error(`serve exited ${code}: ${stderr}`)),
    );
  });
}

const rows = [];
for (let i = 0; i < runs; i++) {
  const dir = mkdtempSync(join(tmpdir(), 'attest-startup-bench-'));
  try {
    rows.push({ run: i + 1, kind: 'first start', ...(await start(join(dir, 'data'))) });
    rows.push({ run: i + 1, kind: 'restart', ...(await start(join(dir, 'data'))) });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
console.log(
  `load average before the last run: ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}; ${runs} run(s); times in ms from spawn`,
);
console.table(rows);
for (const kind of ['first start', 'restart']) {
  const of = rows.filter((r) => r.kind === kind);
  const median = (xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  console.log(
    `${kind}: median ${median(of.map((r) => r.listening))} ms to listen, ${median(of.map((r) => r.cpu))} ms CPU`,
  );
}
