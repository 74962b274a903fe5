// Database outage: answer time while PostgreSQL cannot be reached, and how soon the service
// serves again once it can. Starts its own `attest serve` (dist/, so `npm run build` first) on a
// scratch database behind a TCP proxy (test/support/tcpProxy.ts) that it breaks and mends.
// Usage: DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/outage.ts \
//          [mode=refuse|stall] [outageSeconds=20] [concurrency=8]
//   refuse: the database is down (connections closed at once); stall: a partition (nothing answers).
//   ATTEST_ROOT=/path/to/another/checkout measures that checkout's dist/ instead (before/after).
// Closed-loop init load from `concurrency` clients plus /readyz every 100 ms, 3 s before the
// outage, during it, and 5 s after the database returns.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import { startTcpProxy } from '../test/support/tcpProxy.js';

const [mode = 'refuse', outageSeconds = '20', concurrency = '8'] = process.argv.slice(2);
if (mode !== 'refuse' && mode !== 'stall') throw new Error('mode: refuse or stall');
const adminUrl = process.env.DATABASE_URL;
if (!adminUrl)
  throw new Error('set DATABASE_URL to a PostgreSQL server (a scratch database is created on it)');
const ROOT = process.env.ATTEST_ROOT ?? join(dirname(fileURLToPath(import.meta.url)), '..');
const BIN = join(ROOT, 'bin', 'attest.js');

const name = `attest_outage_${randomBytes(4).toString('hex')}`;
const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
await admin.unsafe(`create database ${name}`);
const dbUrl = new URL(adminUrl);
dbUrl.pathname = `/${name}`;
const proxy = await startTcpProxy(dbUrl.hostname, Number(dbUrl.port || 5432));
const dir = mkdtempSync(join(tmpdir(), 'attest-outage-'));
writeFileSync(join(dir, 'master.key'), randomBytes(32).toString('base64'), { mode: 0o600 });
const env = {
  ...process.env,
  DATABASE_URL: proxy.urlFor(dbUrl.toString()),
  ATTEST_MASTER_KEY_FILE: join(dir, 'master.key'),
  LOG_LEVEL: 'warn',
};
// not spawnSync: the proxy runs in this process's event loop
const cli = (...args: string[]) =>
  new Promise<string>((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { env });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr += c));
    child.once('exit', (code) =>
      code === 0
        ? resolve(stdout)
        : reject(new Error(`attest ${args.join(' ')} failed: ${stderr}`)),
    );
  });
await cli('db', 'migrate');
const key = (
  JSON.parse(await cli('keys', 'create', '--name', 'bench-outage', '--json')) as { key: string }
).key;
const server = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--host', '127.0.0.1'], {
  env,
  stdio: ['ignore', 'ignore', 'pipe'],
});
let exited: string | undefined;
server.once('exit', (code, signal) => (exited = `exit ${code} ${signal ?? ''}`.trim()));
const base = await new Promise<URL>((resolve, reject) => {
  let stderr = '';
  server.stderr!.on('data', (chunk) => {
    stderr += chunk;
    const m = /attest listening on (http:\/\/\S+)/.exec(stderr);
    if (m) resolve(new URL(m[1]!));
  });
  server.once('exit', (code) => reject(new Error(`server exited ${code}: ${stderr}`)));
});

const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
interface Answer {
  start: number;
  end: number;
  status: number | string;
}
function request(path: string, method: string): Promise<Answer> {
  const start = performance.now();
  return new Promise((resolve) => {
    const req = http.request(
      { host: base.hostname, port: base.port, path, method, headers: { 'X-Api-Key': key }, agent },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ start, end: performance.now(), status: res.statusCode! }));
      },
    );
    req.on('error', (err: NodeJS.ErrnoException) =>
      resolve({ start, end: performance.now(), status: `error ${err.code ?? err.message}` }),
    );
    req.end();
  });
}

const inits: Answer[] = [];
const readies: Answer[] = [];
let running = true;
const load = Promise.all([
  ...Array.from({ length: Number(concurrency) }, async () => {
    while (running) inits.push(await request('/api/v1/attestation/init', 'POST'));
  }),
  (async () => {
    while (running) {
      readies.push(await request('/readyz', 'GET'));
      await new Promise((r) => setTimeout(r, 100));
    }
  })(),
]);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
await sleep(3000);
const cutAt = performance.now();
proxy.setMode(mode);
await sleep(Number(outageSeconds) * 1000);
const backAt = performance.now();
proxy.setMode('forward');
await sleep(5000);
running = false;
await load;

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? Math.round(s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!) : NaN;
};
const during = (xs: Answer[]) => xs.filter((a) => a.start >= cutAt && a.end <= backAt);
const statuses = (xs: Answer[]) =>
  xs.reduce<Record<string, number>>((m, a) => ((m[a.status] = (m[a.status] ?? 0) + 1), m), {});
/** from the database's return to the first answer 200 to a request sent after it */
const recovery = (xs: Answer[]) => {
  const first = xs
    .filter((a) => a.start >= backAt && a.status === 200)
    .sort((a, b) => a.end - b.end)[0];
  return first ? Math.round(first.end - backAt) : NaN;
};
const out = during(inits);
const ready = during(readies);
console.log(
  JSON.stringify(
    {
      root: ROOT,
      mode,
      outageSeconds: Number(outageSeconds),
      concurrency: Number(concurrency),
      duringOutage: {
        answers: out.length,
        statuses: statuses(out),
        p50ms: pct(
          out.map((a) => a.end - a.start),
          50,
        ),
        p99ms: pct(
          out.map((a) => a.end - a.start),
          99,
        ),
        readyz: {
          answers: ready.length,
          statuses: statuses(ready),
          p50ms: pct(
            ready.map((a) => a.end - a.start),
            50,
          ),
          p99ms: pct(
            ready.map((a) => a.end - a.start),
            99,
          ),
        },
      },
      recoveryMs: { init: recovery(inits), readyz: recovery(readies) },
      server: exited ?? 'alive',
    },
    null,
    2,
  ),
);
server.kill('SIGTERM');
await new Promise((r) => (exited ? r(null) : server.once('exit', r)));
agent.destroy();
proxy.cut();
await proxy.close();
await admin.unsafe(`drop database if exists ${name} with (force)`);
await admin.end();
rmSync(dir, { recursive: true, force: true });
