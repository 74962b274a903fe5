/**
 * `attest serve --workers N` in real processes (the built binary, node:cluster): bad values
 * refused in one line, and on PostgreSQL (TEST_DATABASE_URL) two workers answering, every
 * exactly-once state change holding across them, one /metrics scrape for all, an admin change
 * reaching both at once, a killed worker replaced, a crash loop stopping the server, SIGTERM
 * draining both, and the statistics of both written once.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { afterAll, describe, expect } from 'vitest';
import {
  createAssertion,
  createAttestation,
  createDeviceKey,
  createTestCa,
  encodeAppleToken,
  TEST_APP_ID,
  type DeviceKey,
  type TestCa,
} from '../support/appleFactory.js';
import {
  baseEnv,
  buildOnce,
  oneLine,
  runBin,
  stopBin,
  watchBin,
  type Watched,
} from '../support/binary.js';
import { it } from '../support/fixtures.js';

const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');
const HOUR = 3_600_000;
const VERIFY = '/api/v1/attestation/verify';

interface Answer {
  status: number;
  body: string;
  requestId: string;
  headers: Record<string, string | string[] | undefined>;
}

/**
 * One request on a connection of its own (no keep-alive agent): node:cluster hands each new
 * connection to the next worker in turn, so concurrent requests spread over the workers.
 */
function send(
  url: string,
  path: string,
  options: { method?: string; key?: string; body?: string } = {},
): Promise<Answer> {
  const target = new URL(path, url);
  const requestId = randomBytes(8).toString('hex');
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: target.hostname,
        port: target.port,
        path: target.pathname,
        method: options.method ?? (options.body === undefined ? 'GET' : 'POST'),
        agent: false,
        headers: {
          'X-Request-Id': requestId,
          ...(options.key ? { 'X-Api-Key': options.key } : {}),
          ...(options.body !== undefined ? { 'Content-Type': 'application/json' } : {}),
        },
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (body += d));
        res.on('end', () =>
          resolve({ status: res.statusCode!, body, requestId, headers: res.headers }),
        );
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

/** The pid of the process that answered `requestId` (its request log line). */
async function pidOf(w: Watched, requestId: string): Promise<number> {
  return (await w.logLine((l) => l.requestId === requestId)).pid as number;
}

async function pidsOf(w: Watched, answers: Answer[]): Promise<Set<number>> {
  return new Set(await Promise.all(answers.map((a) => pidOf(w, a.requestId))));
}

/** The pids of `pid`'s children (its workers). */
function childrenOf(pid: number): number[] {
  const text = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
  return text ? text.split(' ').map(Number) : [];
}

async function registration(ca: TestCa): Promise<{ device: DeviceKey; body: string }> {
  const device = await createDeviceKey();
  const nonce = randomBytes(32);
  const now = Date.now();
  const { attestation } = await createAttestation(ca, device, {
    nonce,
    leafValidity: { notBefore: new Date(now - HOUR), notAfter: new Date(now + 24 * HOUR) },
  });
  return {
    device,
    body: JSON.stringify({
      attestationToken: b64(encodeAppleToken({ nonce, keyId: device.keyId, attestation })),
      expectedNonce: b64(nonce),
    }),
  };
}

function assertionToken(device: DeviceKey, nonce: Uint8Array, counter: number): string {
  const { assertion } = createAssertion(device, { nonce, counter });
  return b64(encodeAppleToken({ nonce, keyId: device.keyId, assertion }));
}

function serveArgs(...extra: string[]): string[] {
  return ['serve', '--port', '0', '--host', '127.0.0.1', ...extra];
}

describe('serve --workers: bad values', () => {
  let dir: string;
  it.beforeAll(({ tempDir }) => {
    buildOnce();
    dir = tempDir;
  }, 300_000);

  it('0, a negative number, a fraction or a word: one line, exit 2', async () => {
    const env = baseEnv({ ATTEST_DATA_DIR: join(dir, 'data') });
    for (const args of [
      ['--workers', '0'],
      ['--workers=-1'],
      ['--workers', '1.5'],
      ['--workers', 'many'],
      ['--workers', ''],
    ]) {
      const run = await runBin(serveArgs(...args), env);
      expect(run.code, args.join(' ')).toBe(2);
      expect(run.stdout).toBe('');
      expect(oneLine(run)).toMatch(/--workers .*a whole number from 1 to 1024, or auto/);
    }
    const fromEnv = await runBin(serveArgs(), { ...env, ATTEST_WORKERS: '0' });
    expect(fromEnv.code).toBe(2);
    expect(oneLine(fromEnv)).toMatch(
      /^attest: environment variable ATTEST_WORKERS must be a whole number from 1 to 1024, or auto .*got "0"/,
    );
    // nothing was created on the way
    expect(existsSync(join(dir, 'data'))).toBe(false);
  }, 60_000);

  it('on the embedded database: two workers serve it, each on its own connections to the owned server', async () => {
    // request lines are info: they name the worker (pid) that answered
    const env = baseEnv({ ATTEST_DATA_DIR: join(dir, 'embedded'), LOG_LEVEL: 'info' });
    const server = watchBin(serveArgs('--workers', '2'), env);
    server.child.setMaxListeners(0);
    try {
      const url = (await server.line(/attest listening on (http:\/\/\S+) \(.*, 2 workers\)/))
        .match[1]!;
      const made = await runBin(['keys', 'create', '--name', 'rp', '--json'], env);
      expect(made.code, made.stderr).toBe(0);
      const { key } = JSON.parse(made.stdout) as { key: string };
      const answers = await Promise.all(
        Array.from({ length: 12 }, () =>
          send(url, '/api/v1/attestation/init', { key, method: 'POST' }),
        ),
      );
      expect(answers.map((a) => a.status)).toEqual(Array(12).fill(200));
      const pids = await pidsOf(server, answers);
      expect(pids.size).toBe(2);
      expect(pids.has(server.child.pid!)).toBe(false);
    } finally {
      await stopBin(server);
    }
    expect((await server.exited).code).toBe(0);
  }, 300_000);
});

const adminUrl = process.env.TEST_DATABASE_URL;

describe.skipIf(!adminUrl)('serve --workers 2 on PostgreSQL', () => {
  let dir: string;
  let dbUrl: string;
  let env: NodeJS.ProcessEnv;
  let ca: TestCa;
  let key: string;
  let tokensKey: string;
  let doomedKey: string;
  let doomedId: string;
  let server: Watched;
  let url: string;
  let workers = new Set<number>();
  /** verifies with `key` or `tokensKey` answered 200: each is one count in the statistics */
  let counted = 0;

  const cli = async (...args: string[]) => {
    const run = await runBin(args, env);
    if (run.code !== 0) throw new Error(`attest ${args.join(' ')}: ${run.stderr}`);
    return run.stdout;
  };
  const verify = async (k: string, body: string) => {
    const answer = await send(url, VERIFY, { key: k, body });
    if (answer.status === 200) counted++;
    return answer;
  };
  const all = <T>(n: number, make: (i: number) => Promise<T>) =>
    Promise.all(Array.from({ length: n }, (_, i) => make(i)));

  it.beforeAll(async ({ postgresDatabase, tempDir }) => {
    buildOnce();
    dbUrl = postgresDatabase!.url;
    dir = join(tempDir, 'workers-pg');
    mkdirSync(dir);
    ca = await createTestCa();
    writeFileSync(join(dir, 'root.pem'), ca.rootPem);
    env = baseEnv({
      DATABASE_URL: dbUrl,
      ATTEST_MASTER_KEY: randomBytes(32).toString('base64'),
      ATTEST_APPLE_ROOT_CA: join(dir, 'root.pem'),
      ATTEST_ISSUER: 'https://attest.workers.example',
      ATTEST_DATA_DIR: join(dir, 'data'),
      // the workers' "caches dropped after a change" lines are debug
      LOG_LEVEL: 'debug',
    });
    await cli('db', 'migrate');
    const made = (args: string[]) =>
      cli('keys', 'create', ...args, '--json').then(
        (out) => JSON.parse(out) as { id: string; key: string },
      );
    key = (await made(['--name', 'rp'])).key;
    tokensKey = (await made(['--name', 'tokens', '--result-tokens'])).key;
    const doomed = await made(['--name', 'doomed']);
    doomedKey = doomed.key;
    doomedId = doomed.id;
    await cli('allowlist', 'add', 'apple', TEST_APP_ID, '--env', 'production');
    server = watchBin(serveArgs('--workers', '2'), env);
    // each awaited log line listens for the process's close meanwhile
    server.child.setMaxListeners(0);
    url = (await server.line(/attest listening on (http:\/\/\S+) \(.*, 2 workers\)/)).match[1]!;
  }, 300_000);

  afterAll(async () => {
    if (server) await stopBin(server);
  });

  it('two worker processes answer, neither of them the primary, and each request logs one whole line', async () => {
    expect(childrenOf(server.child.pid!)).toHaveLength(2);
    const answers = await all(10, () => send(url, '/healthz'));
    expect(answers.map((a) => a.status)).toEqual(Array(10).fill(200));
    workers = await pidsOf(server, answers);
    expect(workers.size).toBe(2);
    expect(workers.has(server.child.pid!)).toBe(false);
    for (const pid of workers) expect(childrenOf(server.child.pid!)).toContain(pid);
  });

  it('one /metrics scrape, answered by one worker, counts the requests of both', async () => {
    // the ten /healthz of the test before, served by both workers
    const scrape = await send(url, '/metrics');
    expect(scrape.status).toBe(200);
    const count =
      /^attest_http_requests_total\{route="\/healthz",method="GET",status="200"\} (\d+)$/m.exec(
        scrape.body,
      );
    expect(Number(count?.[1])).toBe(10);
    // the database-wide gauges come from the primary alone, not once per worker
    expect(scrape.body.match(/^attest_sessions\{state="active"\} /gm)).toHaveLength(1);
  });

  // before any counted verify: a worker killed (SIGKILL) loses the counts it has not handed to the
  // primary yet (it hands them over every second), which the statistics check at the end would miss
  it('a killed worker is logged with its cause and replaced; the server serves on', async () => {
    const [victim] = [...workers];
    process.kill(victim!, 'SIGKILL');
    const died = await server.logLine((l) => l.workerPid === victim);
    expect(died.msg).toMatch(
      new RegExp(`^worker ${victim} died \\(killed by SIGKILL\\): starting another in \\d+ ms$`),
    );
    expect(died.level).toBe(50);
    const replaced = await server.logLine((l) => l.replaces === victim);
    expect(replaced.msg).toMatch(/listening/);
    const answers = await all(10, () => send(url, '/healthz'));
    expect(answers.map((a) => a.status)).toEqual(Array(10).fill(200));
    workers = await pidsOf(server, answers);
    expect(workers.size).toBe(2);
    expect(workers.has(victim!)).toBe(false);
  }, 30_000);

  it('exactly once across workers: an assertion counter, a session and a result token, each raced through both', async () => {
    const r = await registration(ca);
    const registered = await verify(tokensKey, r.body);
    expect(registered.body).toContain('"isValid":true');
    // the same assertion (counter 1) thirty times at once: one is valid
    const nonce = randomBytes(32);
    const body = JSON.stringify({
      attestationToken: assertionToken(r.device, nonce, 1),
      expectedNonce: b64(nonce),
    });
    const assertions = await all(30, () => verify(tokensKey, body));
    expect(assertions.map((a) => a.status)).toEqual(Array(30).fill(200));
    const valid = assertions.filter((a) => a.body.includes('"isValid":true'));
    expect(valid).toHaveLength(1);
    expect(await pidsOf(server, assertions)).toEqual(workers);

    // one session, thirty verifies at once: one consumes it
    const init = await send(url, '/api/v1/attestation/init', { key: tokensKey, method: 'POST' });
    expect(init.status).toBe(200);
    const session = JSON.parse(init.body) as { sessionReference: string; serverNonce: string };
    const sessionBody = JSON.stringify({
      attestationToken: assertionToken(r.device, Buffer.from(session.serverNonce, 'base64'), 2),
      sessionReference: session.sessionReference,
    });
    const sessions = await all(30, () => verify(tokensKey, sessionBody));
    expect(sessions.filter((a) => a.body.includes('"isValid":true'))).toHaveLength(1);
    const reasons = await Promise.all(
      sessions.map(async (a) => (await server.logLine((l) => l.requestId === a.requestId)).reason),
    );
    expect(reasons.filter((r) => r === 'session_consumed')).toHaveLength(29);
    expect(await pidsOf(server, sessions)).toEqual(workers);

    // one result token consumed thirty times at once: one first consume
    const resultToken = (JSON.parse(valid[0]!.body) as { resultToken: string }).resultToken;
    expect(resultToken).toBeTruthy();
    const consumes = await all(30, () =>
      send(url, '/api/v1/results/consume', {
        key: tokensKey,
        body: JSON.stringify({ resultToken }),
      }),
    );
    expect(consumes.map((a) => a.status)).toEqual(Array(30).fill(200));
    expect(consumes.filter((a) => a.body.includes('"alreadyConsumed":false'))).toHaveLength(1);
    expect(consumes.filter((a) => a.body.includes('"alreadyConsumed":true'))).toHaveLength(29);
    expect(await pidsOf(server, consumes)).toEqual(workers);
  }, 60_000);

  it('a key revoked through the CLI is refused by both workers as soon as the change is announced', async () => {
    // both workers know the key (cached for PROPAGATION_MS)
    const before = await all(6, () => verify(doomedKey, '{}'));
    expect(before.map((a) => a.status)).toEqual(Array(6).fill(400));
    expect(await pidsOf(server, before)).toEqual(workers);
    const since = Date.now();
    await cli('keys', 'revoke', doomedId, '--yes');
    // each worker drops its caches on the primary's word (LISTEN/NOTIFY there, IPC to them)
    await Promise.all(
      [...workers].map((pid) =>
        server.logLine(
          (l) =>
            l.pid === pid &&
            l.msg === 'caches dropped after a change' &&
            l.table === 'api_keys' &&
            Date.parse(l.time as string) >= since - 1000,
        ),
      ),
    );
    const after = await all(6, () => verify(doomedKey, '{}'));
    // 403: a revoked key (docs/http-api.md)
    expect(after.map((a) => a.status)).toEqual(Array(6).fill(403));
    expect(await pidsOf(server, after)).toEqual(workers);
    expect(Date.now() - since).toBeLessThan(5000);
  }, 30_000);

  it('SIGTERM drains both workers: requests in flight are answered, then it exits 0 and the statistics are in the table once', async () => {
    // requests whose headers arrived and whose bodies have not: in flight on every worker
    const garbage = JSON.stringify({
      attestationToken: b64(randomBytes(600)),
      expectedNonce: b64(randomBytes(32)),
    });
    const target = new URL(VERIFY, url);
    const inFlight = Array.from({ length: 4 }, () => {
      const requestId = randomBytes(8).toString('hex');
      let started!: () => void;
      const headersSent = new Promise<void>((resolve) => (started = resolve));
      const req = request({
        host: target.hostname,
        port: target.port,
        path: target.pathname,
        method: 'POST',
        agent: false,
        headers: {
          'X-Request-Id': requestId,
          'X-Api-Key': key,
          'Content-Type': 'application/json',
          'Content-Length': Buffer.byteLength(garbage),
          // the worker's 100 Continue says it has the request: it is in flight there
          Expect: '100-continue',
        },
      });
      req.on('continue', () => started());
      req.flushHeaders();
      const answered = new Promise<Answer>((resolve, reject) => {
        req.on('error', reject);
        req.on('response', (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (d: string) => (body += d));
          res.on('end', () =>
            resolve({ status: res.statusCode!, body, requestId, headers: res.headers }),
          );
        });
      });
      return { req, headersSent, answered, requestId };
    });
    await Promise.all(inFlight.map((r) => r.headersSent));
    const since = Date.now();
    server.child.kill('SIGTERM');
    // both workers drain (no new connection; what is in flight is answered, Connection: close)
    await Promise.all(
      [...workers].map((pid) =>
        server.logLine(
          (l) =>
            l.pid === pid && l.msg === 'draining' && Date.parse(l.time as string) >= since - 1000,
        ),
      ),
    );
    for (const r of inFlight) r.req.end(garbage);
    const answers = await Promise.all(inFlight.map((r) => r.answered));
    for (const a of answers) {
      expect(a.status).toBe(200);
      expect(a.body).toContain('"isValid":false');
      expect(a.headers.connection).toBe('close');
      counted++;
    }
    expect((await pidsOf(server, answers)).size).toBe(2);
    const { code } = await server.exited;
    expect(code).toBe(0);
    expect(server.stderr()).not.toMatch(/attest: /);

    // every verify answered by either worker counted once: valid and rejected rows
    const sql = postgres(dbUrl, { max: 1, onnotice: () => {} });
    try {
      const [row] = await sql<{ total: string }[]>`
        select coalesce(sum(count), 0)::text as total from verification_stats
        where outcome in ('valid', 'rejected')`;
      expect(Number(row!.total)).toBe(counted);
    } finally {
      await sql.end();
    }
  }, 60_000);
});

describe.skipIf(!adminUrl)('serve --workers above the core count, on PostgreSQL', () => {
  let dir: string;
  let name: string;
  let env: NodeJS.ProcessEnv;
  let server: Watched;
  const count = availableParallelism() + 1;

  it.beforeAll(async ({ tempDir }) => {
    buildOnce();
    dir = join(tempDir, 'workers-loop');
    mkdirSync(dir);
    name = `attest_test_workers_${randomBytes(5).toString('hex')}`;
    const admin = postgres(adminUrl!, { max: 1, onnotice: () => {} });
    await admin.unsafe(`create database ${name}`);
    await admin.end();
    const dbUrl = new URL(adminUrl!);
    dbUrl.pathname = `/${name}`;
    env = baseEnv({
      DATABASE_URL: dbUrl.toString(),
      ATTEST_MASTER_KEY: randomBytes(32).toString('base64'),
      ATTEST_DATA_DIR: join(dir, 'data'),
      LOG_LEVEL: 'info',
    });
  }, 120_000);

  afterAll(async () => {
    if (server) await stopBin(server);
    const admin = postgres(adminUrl!, { max: 1, onnotice: () => {} });
    await admin.unsafe(`drop database if exists ${name} with (force)`);
    await admin.end();
  });

  it('warns once, sums every worker on ATTEST_METRICS_PORT, and stops with one line and exit 3 when its workers keep dying', async () => {
    server = watchBin(serveArgs('--workers', String(count), '--metrics-port', '0'), env);
    server.child.setMaxListeners(0);
    const url = (await server.line(/attest listening on (http:\/\/\S+)/)).match[1]!;
    const metricsUrl = (await server.line(/metrics on (http:\/\/\S+)/)).match[1]!;
    const warned = await server.logLine((l) => /workers on \d+ cores/.test(String(l.msg)));
    expect(warned.level).toBe(40);

    const answers = await Promise.all(Array.from({ length: 9 }, () => send(url, '/healthz')));
    expect((await pidsOf(server, answers)).size).toBeGreaterThan(1);
    // the API port no longer serves /metrics; the metrics port sums every worker
    expect((await send(url, '/metrics')).status).toBe(404);
    const scrape = await send(metricsUrl, '/metrics');
    expect(scrape.body).toMatch(
      /^attest_http_requests_total\{route="\/healthz",method="GET",status="200"\} 9$/m,
    );

    // five deaths within 30 s: the server gives up rather than loop
    for (let death = 1; death <= 5; death++) {
      let victim: number | undefined;
      // a replacement may still be starting: take a worker that is there
      while (victim === undefined) {
        victim = childrenOf(server.child.pid!)[0];
        if (victim === undefined) await new Promise((resolve) => setTimeout(resolve, 50));
      }
      process.kill(victim, 'SIGKILL');
      await server.logLine((l) => l.workerPid === victim);
    }
    const { code } = await server.exited;
    expect(code).toBe(3);
    const lines = server.stderr().split('\n').filter(Boolean);
    expect(lines.filter((l) => l.startsWith('attest: '))).toEqual([
      expect.stringMatching(
        /^attest: workers keep dying \(5 in 30 s; the last, pid \d+: killed by SIGKILL\): stopping$/,
      ),
    ]);
    // warned once, by the primary
    expect(server.logs().filter((l) => /workers on \d+ cores/.test(String(l.msg)))).toHaveLength(1);
  }, 120_000);
});
