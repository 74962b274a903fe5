#!/usr/bin/env node
// How long a CLI command takes from exec to exit, paired with `node -e 0` in the same run: the
// ratio is what the machine's load cannot inflate much, as both pay the same start-up of node.
// Commands are run in turn (one of each, then again), so a burst of load hits them all alike.
// `keys list` and `__complete-ids keys` (what tab completion runs) go through a running server,
// started here on a scratch embedded database.
//
//   npm run build && node bench/cliStartup.mjs [rounds=15]
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';

const BIN = join(import.meta.dirname, '..', 'bin', 'attest.js');
const rounds = Number(process.argv[2] ?? 15);
const dataDir = mkdtempSync(join(tmpdir(), 'attest-cli-bench-'));
const env = { ...process.env, ATTEST_DATA_DIR: dataDir, NO_COLOR: '1' };

/** The issue's targets: median wall time at most this many times `node -e 0`'s. */
const CASES = [
  { name: 'node -e 0', args: null, target: null },
  { name: 'attest --version', args: ['--version'], target: 2 },
  { name: 'attest --help', args: ['--help'], target: 2 },
  { name: 'attest keys list (server running)', args: ['keys', 'list'], target: 4 },
  { name: 'attest __complete-ids keys (completion)', args: ['__complete-ids', 'keys'], target: 3 },
];

function runOnce(args) {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, args === null ? ['-e', '0'] : [BIN, ...args], {
    env,
    encoding: 'utf8',
  });
  const ms = performance.now() - t0;
  if (r.status !== 0)
    throw new Error(`${args?.join(' ') ?? 'node'}: exit ${r.status}: ${r.stderr}`);
  return ms;
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const server = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--host', '127.0.0.1'], {
  env,
  stdio: ['ignore', 'pipe', 'inherit'],
});
try {
  // listening: its first log line says so
  await new Promise((resolve, reject) => {
    let text = '';
    server.stdout.on('data', (chunk) => {
      text += chunk;
      if (text.includes('"listening"') || text.includes('listening')) resolve();
    });
    server.once('exit', (code) => reject(new Error(`serve exited ${code}`)));
  });
  server.stdout.resume();
  runOnce(['keys', 'create', '--name', 'bench', '--json']);

  const times = new Map(CASES.map((c) => [c.name, []]));
  const load = [loadavg()[0]];
  for (let i = 0; i < rounds; i++) for (const c of CASES) times.get(c.name).push(runOnce(c.args));
  load.push(loadavg()[0]);

  const base = median(times.get('node -e 0'));
  console.log(`${rounds} rounds; load average ${load.map((l) => l.toFixed(1)).join(' -> ')}`);
  console.log('| command | median ms | x node -e 0 | target | |');
  console.log('| --- | ---: | ---: | ---: | --- |');
  for (const c of CASES) {
    const m = median(times.get(c.name));
    const ratio = m / base;
    const verdict = c.target === null ? '' : ratio <= c.target ? 'met' : 'missed';
    console.log(
      `| ${c.name} | ${m.toFixed(0)} | ${ratio.toFixed(2)} | ${c.target === null ? '' : `<= ${c.target}x`} | ${verdict} |`,
    );
  }
} finally {
  server.kill('SIGTERM');
  await new Promise((r) => server.once('exit', r));
  rmSync(dataDir, { recursive: true, force: true });
}
