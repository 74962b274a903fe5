// Lockout of a legitimate RP: can an attacker who knows a live key id and owns many addresses keep
// the key's owner out of a fresh instance? Starts its own `attest serve` (dist/, so `npm run build`
// first) on loopback, bounded in time.
// Usage: node bench/authLockout.mjs [wrongPerSecond=90] [randomIdsPerSecond=50] [addresses=1000] [legitSeconds=5] [scenario=origin]
//   DATABASE_URL=postgres://... to run on PostgreSQL (a scratch database: it creates API keys);
//   without it, an embedded database in a temporary folder.
// 1. A first instance serves the RP once from 127.0.0.1 (so the database knows that origin), and stops.
// 2. A fresh instance starts; at once, from `addresses` rotating loopback addresses (127.1.x.y),
//    `wrongPerSecond` distinct wrong secrets per second for the RP's key id, and from other rotating
//    addresses (127.2.x.y) `randomIdsPerSecond` keys with random ids.
// 3. Three seconds into the attack, the RP tries every 100 ms from 127.0.0.1 until it gets in, then
//    calls for `legitSeconds` more (2 clients, closed loop). A never-seen key (127.0.0.3) and the
//    flooded key from a never-seen RP address (127.0.0.4) are tried once each.
// Target: the RP in within 2 s of its first try, and no legitimate request answers 503.
// scenario=new-address: step 1 is skipped and the RP calls from 127.0.0.4, so its key (made by
// `keys create` just before) was never used anywhere: a brand-new key, or an RP that moved to a
// new egress address. Target: in within 3 s of its first try.
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';

const ID_ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyz';

/** POST init with `key` from `localAddress` on a connection of its own; resolves the status */
function post(url, key, localAddress) {
  const started = performance.now();
  return new Promise((resolve) => {
    const req = http.request(
      url,
      { method: 'POST', headers: { 'X-Api-Key': key }, agent: false, localAddress },
      (res) => {
        res.resume();
        res.on('end', () =>
          resolve({ status: String(res.statusCode), ms: performance.now() - started }),
        );
      },
    );
    req.on('error', (err) =>
      resolve({ status: `error ${err.code ?? err.message}`, ms: performance.now() - started }),
    );
    req.end();
  });
}

if (!isMainThread) {
  // the attacker: its own thread, so the RP's event loop does not pay for it
  const { url, prefixAndId, wrongRate, randomRate, addresses } = workerData;
  const statuses = { wrong: {}, random: {} };
  let stop = false;
  const count = (kind, status) => (statuses[kind][status] = (statuses[kind][status] ?? 0) + 1);
  const sent = { wrong: 0, random: 0 };
  const pending = new Set();
  const fire = (kind, key, address) => {
    sent[kind]++;
    const p = post(url, key, address).then(({ status }) => {
      count(kind, status);
      pending.delete(p);
    });
    pending.add(p);
  };
  const randomId = () => Array.from(randomBytes(16), (b) => ID_ALPHABET[b % 36]).join('');
  const address = (net, i) => `127.${net}.${Math.floor(i / 250)}.${(i % 250) + 1}`;
  parentPort.on('message', async (message) => {
    if (message === 'stop') {
      stop = true;
      return;
    }
    const started = performance.now();
    let wrong = 0;
    let random = 0;
    // bounded: the main thread always sends 'stop', and the loop also ends after 120 s
    while (!stop && performance.now() - started < 120_000) {
      const elapsed = (performance.now() - started) / 1000;
      for (; wrong < Math.floor(elapsed * wrongRate); wrong++)
        fire(
          'wrong',
          prefixAndId + randomBytes(32).toString('base64url'),
          address(1, wrong % addresses),
        );
      for (; random < Math.floor(elapsed * randomRate); random++)
        fire(
          'random',
          `attest_${randomId()}${randomBytes(32).toString('base64url')}`,
          address(2, random % addresses),
        );
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    await Promise.all(pending);
    parentPort.postMessage({ sent, statuses, seconds: (performance.now() - started) / 1000 });
    parentPort.close();
  });
} else {
  const [
    wrongRate = '90',
    randomRate = '50',
    addresses = '1000',
    legitSeconds = '5',
    scenario = 'origin',
  ] = process.argv.slice(2);
  if (scenario !== 'origin' && scenario !== 'new-address')
    throw new Error(`scenario must be origin or new-address, not ${scenario}`);
  const rpAddress = scenario === 'origin' ? '127.0.0.1' : '127.0.0.4';
  const targetMs = scenario === 'origin' ? 2000 : 3000;
  const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
  const BIN = join(ROOT, 'bin', 'attest.js');
  const dir = mkdtempSync(join(tmpdir(), 'attest-lockout-'));
  const env = { ...process.env, ATTEST_DATA_DIR: join(dir, 'data'), LOG_LEVEL: 'warn' };

  function cli(...args) {
    const run = spawnSync(process.execPath, [BIN, ...args], { env, encoding: 'utf8' });
    if (run.status !== 0) throw new Error(`attest ${args.join(' ')} failed: ${run.stderr}`);
    return run.stdout;
  }
  async function startServer() {
    const server = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--host', '127.0.0.1'], {
      env: { ...env, LOG_LEVEL: 'info' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    const url = await new Promise((resolve, reject) => {
      let stderr = '';
      const timer = setTimeout(() => reject(new Error(`server did not start: ${stderr}`)), 60_000);
      server.stderr.on('data', (chunk) => {
        stderr += chunk;
        const m = /attest listening on (http:\/\/\S+)/.exec(stderr);
        if (m) {
          clearTimeout(timer);
          resolve(new URL('/api/v1/attestation/init', m[1]).toString());
        }
      });
      server.once('exit', (code) => reject(new Error(`server exited ${code}: ${stderr}`)));
    });
    return { server, url };
  }
  async function stopServer(server) {
    server.kill('SIGTERM');
    await new Promise((resolve) => server.once('exit', resolve));
  }

  cli('db', 'migrate');
  const legit = JSON.parse(cli('keys', 'create', '--name', 'bench-rp', '--json'));
  const neverSeen = JSON.parse(cli('keys', 'create', '--name', 'bench-never-seen', '--json'));

  // 1. the RP's earlier traffic, on a first instance
  if (scenario === 'origin') {
    const { server, url } = await startServer();
    const first = await post(url, legit.key, '127.0.0.1');
    if (first.status !== '200') throw new Error(`the RP's first call answered ${first.status}`);
    // the origin is written after the answer; a few more calls give it time (bounded)
    for (let i = 0; i < 5; i++) await post(url, legit.key, '127.0.0.1');
    await new Promise((resolve) => setTimeout(resolve, 500));
    await stopServer(server);
  }

  // 2. a fresh instance, attacked from its first second
  const { server, url } = await startServer();
  /** the server's CPU time so far, in ms (Linux /proc; NaN elsewhere) */
  const serverCpuMs = () => {
    try {
      const fields = readFileSync(`/proc/${server.pid}/stat`, 'utf8').split(') ')[1].split(' ');
      return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // utime + stime in USER_HZ ticks
    } catch {
      return NaN;
    }
  };
  const cpuBefore = serverCpuMs();
  const attackStarted = performance.now();
  const attacker = new Worker(fileURLToPath(import.meta.url), {
    workerData: {
      url,
      prefixAndId: legit.key.slice(0, legit.key.indexOf('_') + 17),
      wrongRate: Number(wrongRate),
      randomRate: Number(randomRate),
      addresses: Number(addresses),
    },
  });
  const attackDone = new Promise((resolve) => attacker.once('message', resolve));
  attacker.postMessage('start');
  try {
    await new Promise((resolve) => setTimeout(resolve, 3000));

    // 3. the RP
    const legitStatuses = {};
    const note = (status) => (legitStatuses[status] = (legitStatuses[status] ?? 0) + 1);
    const firstTry = performance.now();
    let inAfter = NaN;
    let tries = 0;
    for (; tries < 200; tries++) {
      const attempt = post(url, legit.key, rpAddress);
      const { status } = await attempt;
      note(status);
      if (status === '200') {
        inAfter = performance.now() - firstTry;
        tries++;
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const newcomer = post(url, neverSeen.key, '127.0.0.3');
    const newAddress = post(url, legit.key, '127.0.0.4');
    const latencies = [];
    const until = performance.now() + Number(legitSeconds) * 1000;
    await Promise.all(
      [0, 1].map(async () => {
        while (performance.now() < until) {
          const { status, ms } = await post(url, legit.key, rpAddress);
          note(status);
          latencies.push(ms);
        }
      }),
    );
    const [newcomerResult, newAddressResult] = await Promise.all([newcomer, newAddress]);
    attacker.postMessage('stop');
    const attack = await attackDone;
    const cpuPerSecond = (serverCpuMs() - cpuBefore) / ((performance.now() - attackStarted) / 1000);
    latencies.sort((a, b) => a - b);
    const q = (p) =>
      latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? NaN;

    console.log(
      `database: ${process.env.DATABASE_URL ? 'postgres' : 'embedded'}; fresh instance attacked from its start, ${addresses} rotating addresses`,
    );
    console.log(
      `attack: ${attack.sent.wrong} wrong secrets for live id ${legit.id} (${(attack.sent.wrong / attack.seconds).toFixed(0)}/s): ${JSON.stringify(attack.statuses.wrong)}`,
    );
    console.log(
      `attack: ${attack.sent.random} random ids (${(attack.sent.random / attack.seconds).toFixed(0)}/s): ${JSON.stringify(attack.statuses.random)}`,
    );
    console.log(
      `RP (${scenario === 'origin' ? 'known origin 127.0.0.1' : 'brand-new key from 127.0.0.4'}): in ${inAfter.toFixed(0)} ms after its first try (${tries} tries); then ${latencies.length} calls in ${legitSeconds} s, p50 ${q(0.5).toFixed(1)} ms, p99 ${q(0.99).toFixed(1)} ms; all RP statuses ${JSON.stringify(legitStatuses)}`,
    );
    console.log(
      `server CPU during the run: ${cpuPerSecond.toFixed(0)} ms/s; machine load average ${loadavg()[0].toFixed(1)} on ${availableParallelism()} cores`,
    );
    console.log(
      `never-seen key from 127.0.0.3: ${newcomerResult.status} in ${newcomerResult.ms.toFixed(0)} ms; the flooded key from a new RP address 127.0.0.4: ${newAddressResult.status} in ${newAddressResult.ms.toFixed(0)} ms`,
    );
    const legit503 = (legitStatuses['503'] ?? 0) + (newcomerResult.status === '503' ? 1 : 0);
    const pass = inAfter <= targetMs && legit503 === 0 && newcomerResult.status === '200';
    console.log(
      `-> ${pass ? 'PASS' : 'FAIL'} (target: RP in within ${targetMs} ms of its first try, no legitimate 503, never-seen key 200)`,
    );
    process.exitCode = pass ? 0 : 1;
  } finally {
    attacker.postMessage('stop');
    await stopServer(server);
    rmSync(dir, { recursive: true, force: true });
  }
}
