/**
 * What `attest serve`'s memory is made of after a load like bench:http's: registers App Attest and
 * android-key keys, sends their assertions, Play Integrity, init, garbage and session round trips,
 * and after each phase prints the server's RSS (anonymous and file-backed), its V8 heap and
 * external memory (/metrics), and its process-wide heap statistics. Optionally writes a heap
 * snapshot at the end and sums it by constructor.
 *
 *   createdb -h 127.0.0.1 -U postgres memtest_x
 *   npm run build
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/memtest_x npx tsx bench/memory.ts \
 *     [--apple 4000] [--android 2000] [--rounds 5] [--play 4000] [--concurrency 64] \
 *     [--node-args "--trace-gc"] [--env MALLOC_ARENA_MAX=2] [--snapshot] [--gc-log FILE]
 *   dropdb -h 127.0.0.1 -U postgres memtest_x
 *
 * Without DATABASE_URL it uses an embedded database in a temporary folder.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  createWriteStream,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { AndroidDeviceKey } from '../src/core/dev/androidKeyMint.js';
import type { DeviceKey } from '../test/support/appleFactory.js';
import {
  ANDROID_PACKAGE,
  androidAllowlistArgs,
  androidAssertionBody,
  androidRegistrationBody,
  assertionBody,
  assertionToken,
  createMaterial,
  garbageBody,
  playIntegrityBody,
  registration,
  TEST_APP_ID,
} from './http/tokens.js';

const { values } = parseArgs({
  options: {
    apple: { type: 'string', default: '4000' },
    android: { type: 'string', default: '2000' },
    rounds: { type: 'string', default: '5' },
    play: { type: 'string', default: '4000' },
    concurrency: { type: 'string', default: '64' },
    'node-args': { type: 'string', default: '' },
    env: { type: 'string', multiple: true, default: [] },
    snapshot: { type: 'boolean', default: false },
    'gc-log': { type: 'string' },
  },
});
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const BIN = join(ROOT, 'bin', 'attest.js');
const concurrency = Number(values.concurrency);
const dir = mkdtempSync(join(tmpdir(), 'attest-mem-'));
const material = await createMaterial();
writeFileSync(join(dir, 'root.pem'), material.ca.rootPem);
writeFileSync(join(dir, 'android-root.pem'), material.android.rootPem);
const env: NodeJS.ProcessEnv = {
  ...process.env,
  ATTEST_DATA_DIR: join(dir, 'data'),
  ATTEST_APPLE_ROOT_CA: join(dir, 'root.pem'),
  ATTEST_ANDROID_ROOT_CA: join(dir, 'android-root.pem'),
  ATTEST_ANDROID_REVOCATION_URL: 'off',
  ATTEST_MASTER_KEY: randomBytes(32).toString('base64'),
  LOG_LEVEL: 'warn',
  ATTEST_ISSUER: 'https://attest.memory.example',
};
delete env.ATTEST_LOG_FILE;
delete env.ATTEST_MASTER_KEY_FILE;
const cli = (...args: string[]) => {
  const run = spawnSync(process.execPath, [BIN, ...args], { env, encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`attest ${args.join(' ')} failed: ${run.stderr}`);
  return run.stdout;
};
cli('db', 'migrate');
const apiKey = (
  JSON.parse(cli('keys', 'create', '--name', `mem-${Date.now()}`, '--json')) as { key: string }
).key;
cli('allowlist', 'add', 'apple', TEST_APP_ID, '--env', 'production');
cli(...androidAllowlistArgs(material));
cli('allowlist', 'add', 'android', ANDROID_PACKAGE, '--key-attestation');

const serverEnv = { ...env };
for (const kv of values.env) {
  const i = kv.indexOf('=');
  serverEnv[kv.slice(0, i)] = kv.slice(i + 1);
}
const nodeArgs = values['node-args'].split(' ').filter(Boolean);
if (values.snapshot) nodeArgs.push('--heapsnapshot-signal=SIGUSR2');
const server: ChildProcess = spawn(
  process.execPath,
  [...nodeArgs, BIN, 'serve', '--port', '0', '--host', '127.0.0.1'],
  { env: serverEnv, cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
);
// --trace-gc writes to stdout
const gcLog = values['gc-log'] ? createWriteStream(values['gc-log']) : null;
let gcText = '';
server.stdout!.on('data', (chunk: Buffer) => {
  gcLog?.write(chunk);
  gcText += chunk;
});
const url = await new Promise<URL>((resolve, reject) => {
  let stderr = '';
  server.stderr!.on('data', (chunk: Buffer) => {
    stderr += chunk;
    const m = /listening on (http:\/\/\S+)/.exec(stderr);
    if (m) resolve(new URL(m[1]!));
  });
  server.once('exit', (code) => reject(new Error(`serve exited ${code}: ${stderr}`)));
});
const pid = server.pid!;
const headers = { 'X-Api-Key': apiKey, 'Content-Type': 'application/json' };
const VERIFY = new URL('/api/v1/attestation/verify', url);
const INIT = new URL('/api/v1/attestation/init', url);

async function post(target: URL, body?: string): Promise<string> {
  const send = () => fetch(target, { method: 'POST', headers, ...(body ? { body } : {}) });
  // the server closes a connection idle for 5 s (keepAliveTimeout); one the client reused just
  // then fails before the request reached the server: sent again once
  const res = await send().catch(send);
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${target.pathname} answered ${res.status}: ${text}`);
  return text;
}

/** Runs `task(i)` for i < n, `concurrency` at a time. */
async function pool(n: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < n) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, n) }, worker));
}

const expectValid = (text: string, what: string) => {
  if (!text.includes('"isValid":true'))
    throw new Error(`${what} was not valid: ${text.slice(0, 300)}`);
};

function status(): Record<string, number> {
  const text = readFileSync(`/proc/${pid}/status`, 'utf8');
  const out: Record<string, number> = {};
  for (const f of ['VmRSS', 'VmHWM', 'RssAnon', 'RssFile', 'Threads']) {
    const m = new RegExp(`${f}:\\s+(\\d+)`).exec(text);
    out[f] = m ? Number(m[1]) : NaN;
  }
  return out;
}

async function sample(phase: string): Promise<void> {
  const metrics = await (await fetch(new URL('/metrics', url))).text();
  const gauge = (name: string, label = '') =>
    Number(new RegExp(`^attest_${name}${label} (\\S+)$`, 'm').exec(metrics)?.[1] ?? NaN) / 2 ** 20;
  const s = status();
  const mb = (kb: number) => (kb / 1024).toFixed(1);
  console.log(
    [
      phase.padEnd(24),
      `RSS ${mb(s.VmRSS!)}`,
      `peak ${mb(s.VmHWM!)}`,
      `anon ${mb(s.RssAnon!)}`,
      `file ${mb(s.RssFile!)}`,
      `heap ${gauge('nodejs_heap_size_used_bytes').toFixed(1)}/${gauge('nodejs_heap_size_total_bytes').toFixed(1)}`,
      `external ${gauge('nodejs_external_memory_bytes').toFixed(1)}`,
      `old ${gauge('nodejs_heap_space_size_used_bytes', '{space="old"}').toFixed(1)}`,
      `new ${gauge('nodejs_heap_space_size_total_bytes', '{space="new"}').toFixed(1)}`,
      `code ${gauge('nodejs_heap_space_size_used_bytes', '{space="code"}').toFixed(1)}`,
      `threads ${s.Threads}`,
      '(MB)',
    ].join('  '),
  );
  const kinds = smapsByKind();
  console.log(
    `${''.padEnd(24)}  ${Object.entries(kinds)
      .map(([k, v]) => `${k} ${mb(v)}`)
      .join('  ')}`,
  );
}

const apple: { device: DeviceKey; counter: number }[] = [];
const android: AndroidDeviceKey[] = [];
const rounds = Number(values.rounds);
try {
  await sample('started');
  const started = performance.now();
  await pool(Number(values.apple), async () => {
    const r = await registration(material);
    expectValid(await post(VERIFY, r.body), 'an App Attest registration');
    apple.push({ device: r.device, counter: 0 });
  });
  await sample(`${apple.length} app attest keys`);
  await pool(Number(values.android), async () => {
    const r = await androidRegistrationBody(material);
    expectValid(await post(VERIFY, r.body), 'an android-key registration');
    android.push(r.device);
  });
  await sample(`${android.length} android keys`);
  for (let round = 0; round < rounds; round++) {
    await pool(apple.length, async (i) => {
      const d = apple[i]!;
      expectValid(await post(VERIFY, assertionBody(d.device, ++d.counter)), 'an assertion');
    });
    await pool(android.length, async (i) => {
      expectValid(await post(VERIFY, androidAssertionBody(android[i]!)), 'an android assertion');
    });
  }
  await sample(`${rounds} assertion rounds`);
  const play: string[] = [];
  for (let i = 0; i < 32; i++) play.push(await playIntegrityBody(material));
  await pool(Number(values.play), async (i) => {
    expectValid(await post(VERIFY, play[i % play.length]), 'a Play Integrity verify');
  });
  await pool(Number(values.play), async () => {
    await post(INIT);
  });
  await pool(Number(values.play), async () => {
    const text = await post(VERIFY, garbageBody());
    if (!text.includes('"isValid":false')) throw new Error(`garbage accepted: ${text}`);
  });
  await pool(Math.min(apple.length, Number(values.play)), async (i) => {
    const d = apple[i]!;
    const session = JSON.parse(await post(INIT)) as {
      sessionReference: string;
      serverNonce: string;
    };
    const body = JSON.stringify({
      attestationToken: assertionToken(
        d.device,
        Buffer.from(session.serverNonce, 'base64'),
        ++d.counter,
      ),
      sessionReference: session.sessionReference,
    });
    expectValid(await post(VERIFY, body), 'a session verify');
  });
  await sample('play, init, garbage, session');
  console.log(`load took ${((performance.now() - started) / 1000).toFixed(0)} s`);
  if (gcText) summarizeGc(gcText);
  await new Promise((r) => setTimeout(r, 10_000));
  await sample('10 s idle');
  if (values.snapshot) {
    server.kill('SIGUSR2');
    // the snapshot is written synchronously by the server; wait for the file to be complete
    let file: string | undefined;
    for (let i = 0; i < 120 && !file; i++) {
      await new Promise((r) => setTimeout(r, 1000));
      const f = readdirSync(dir).find((n) => n.endsWith('.heapsnapshot'));
      // a written snapshot is JSON that ends with its closing brace
      if (f && readFileSync(join(dir, f), 'utf8').trimEnd().endsWith('}')) file = join(dir, f);
    }
    if (!file) throw new Error('no heap snapshot written');
    summarizeSnapshot(file);
  }
} finally {
  server.kill('SIGTERM');
  await new Promise((r) => server.once('exit', r));
  gcLog?.end();
  rmSync(dir, { recursive: true, force: true });
}

/**
 * Resident memory by kind of mapping: glibc's main arena ([heap]), its per-thread arenas (64 MiB
 * reservations: a read-write head and an inaccessible tail), other anonymous mappings (V8's heap
 * pages, large malloc chunks, stacks) and files (code of node and its libraries).
 */
function smapsByKind(): Record<string, number> {
  const lines = readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n');
  const maps: { start: number; end: number; perms: string; name: string; rss: number }[] = [];
  for (const line of lines) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \d+\s*(.*)$/.exec(line);
    if (head) {
      maps.push({
        start: parseInt(head[1]!, 16),
        end: parseInt(head[2]!, 16),
        perms: head[3]!,
        name: head[4]!,
        rss: 0,
      });
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss) maps.at(-1)!.rss = Number(rss[1]);
  }
  const out: Record<string, number> = { mainArena: 0, threadArenas: 0, otherAnon: 0, files: 0 };
  const ARENA = 64 * 2 ** 20;
  for (const [i, m] of maps.entries()) {
    if (m.name === '[heap]') out.mainArena! += m.rss;
    else if (m.name.startsWith('/')) out.files! += m.rss;
    else if (m.name === '') {
      const next = maps[i + 1];
      const arena =
        m.start % ARENA === 0 &&
        m.perms.startsWith('rw') &&
        (m.end - m.start === ARENA ||
          (next &&
            next.start === m.end &&
            next.perms.startsWith('---') &&
            next.end - m.start === ARENA));
      if (arena) out.threadArenas! += m.rss;
      else out.otherAnon! += m.rss;
    } else out.otherAnon! += m.rss;
  }
  return out;
}

/** The snapshot's self sizes summed by node type and constructor name, largest first. */
function summarizeSnapshot(file: string): void {
  const snap = JSON.parse(readFileSync(file, 'utf8')) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
    nodes: number[];
    strings: string[];
  };
  const fields = snap.snapshot.meta.node_fields;
  const types = snap.snapshot.meta.node_types[0];
  const width = fields.length;
  const [iType, iName, iSize] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f));
  const sums = new Map<string, { bytes: number; count: number }>();
  let total = 0;
  for (let i = 0; i < snap.nodes.length; i += width) {
    const type = types[snap.nodes[i + iType!]!]!;
    const name = snap.strings[snap.nodes[i + iName!]!]!;
    const key = type === 'object' || type === 'native' ? `${type} ${name}` : type;
    const size = snap.nodes[i + iSize!]!;
    total += size;
    const s = sums.get(key) ?? { bytes: 0, count: 0 };
    s.bytes += size;
    s.count++;
    sums.set(key, s);
  }
  console.log(
    `heap snapshot: ${(total / 2 ** 20).toFixed(1)} MB in ${snap.nodes.length / width} nodes`,
  );
  for (const [key, s] of [...sums].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, 30))
    console.log(
      `  ${(s.bytes / 2 ** 20).toFixed(2).padStart(7)} MB  ${String(s.count).padStart(8)}  ${key.slice(0, 90)}`,
    );
}

/** Counts and main-thread pauses of --trace-gc's lines, by kind. */
function summarizeGc(text: string): void {
  const kinds = new Map<string, number[]>();
  for (const m of text.matchAll(
    /: (Scavenge|Mark-Compact|Mark-Compact \(reduce\)|Minor Mark-Sweep)[^,]*, ([\d.]+) \/ [\d.]+ ms(?: +\(\+ ([\d.]+) ms in \d+ steps[^,]*, biggest step ([\d.]+) ms)?/g,
  )) {
    const list = kinds.get(m[1]!) ?? [];
    list.push(Number(m[2]));
    kinds.set(m[1]!, list);
    if (m[4]) {
      const steps = kinds.get(`${m[1]} incremental step (biggest)`) ?? [];
      steps.push(Number(m[4]));
      kinds.set(`${m[1]} incremental step (biggest)`, steps);
    }
  }
  for (const [kind, pauses] of kinds) {
    pauses.sort((a, b) => a - b);
    const at = (q: number) => pauses[Math.min(pauses.length - 1, Math.floor(q * pauses.length))]!;
    const sum = pauses.reduce((a, b) => a + b, 0);
    console.log(
      `gc ${kind}: ${pauses.length}, total ${sum.toFixed(0)} ms, p50 ${at(0.5).toFixed(2)} ms, p99 ${at(0.99).toFixed(2)} ms, max ${at(1).toFixed(2)} ms`,
    );
  }
}
