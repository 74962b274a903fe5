/**
 * One scenario's load driven by wrk (Debian's C load generator, one thread): it leaves the cores to
 * the server, so the hello-world yardstick measures the server and not the load generator as
 * autocannon's JavaScript did. The requests are made beforehand (bench/http/wrk.lua sends them in
 * order, each answer checked); autocannon stays for the session pair (an `init` answer feeds the
 * next request) and for the suite's smoke run.
 */
import { spawn, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const SCRIPT = join(dirname(fileURLToPath(import.meta.url)), 'wrk.lua');

/** wrk's path when it is installed, else undefined */
export function findWrk(): string | undefined {
  const which = spawnSync('sh', ['-c', 'command -v wrk'], { encoding: 'utf8' });
  const path = which.stdout.trim();
  return which.status === 0 && path ? path : undefined;
}

/** What wrk sends for a scenario: one fixed body, or bodies sent in order (once, or round and round). */
export interface WrkLoad {
  method?: 'POST' | 'GET';
  path: string;
  headers: Record<string, string>;
  /** one fixed body, or the list sent in order */
  body?: string;
  bodies?: string[];
  /** each of `bodies` is sent once (use-once tokens) */
  once?: boolean;
  /** every correct answer has these substrings (status 200) */
  expect: string;
  expect2?: string;
}

export interface WrkResult {
  correct: number;
  wrong: number;
  errors: number;
  requests: number;
  seconds: number;
  p50: number;
  p99: number;
  sampleWrong?: string;
}

export async function runWrk(
  wrk: string,
  url: URL,
  load: WrkLoad,
  opts: { connections: number; seconds: number; amount?: number; dir: string },
): Promise<WrkResult> {
  let bodies = '';
  if (load.bodies) {
    bodies = join(opts.dir, 'wrk-bodies.txt');
    writeFileSync(bodies, `${load.bodies.join('\n')}\n`);
  }
  const env = {
    ...process.env,
    ATTEST_WRK_METHOD: load.method ?? 'POST',
    ATTEST_WRK_PATH: load.path,
    ATTEST_WRK_HEADERS: Object.entries(load.headers)
      .map(([k, v]) => `${k}: ${v}\n`)
      .join(''),
    ATTEST_WRK_BODY: load.body ?? '',
    ATTEST_WRK_BODIES: bodies,
    ATTEST_WRK_ONCE: load.once ? '1' : '0',
    ATTEST_WRK_AMOUNT: String(opts.amount ?? 0),
    ATTEST_WRK_EXPECT: load.expect,
    ATTEST_WRK_EXPECT2: load.expect2 ?? '',
  };
  // a run bounded by a count stops itself at its last answer (wrk.lua); the duration is a ceiling
  const duration = opts.amount ? 600 : opts.seconds;
  const args = ['-t1', `-c${opts.connections}`, `-d${duration}s`, '--timeout', '30s'];
  args.push('-s', SCRIPT, url.origin);
  const child = spawn(wrk, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (c) => {
    out += c;
    // a run bounded by a count: its last answer is in (wrk.lua), and wrk reports on SIGINT
    if (opts.amount && out.includes('ATTEST_WRK_DONE')) child.kill('SIGINT');
  });
  child.stderr.on('data', (c) => (err += c));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  const line = /^ATTEST_WRK (\{.*\})$/m.exec(out)?.[1];
  if (code !== 0 || !line) throw new Error(`wrk ${args.join(' ')} failed (${code}): ${err}${out}`);
  const r = JSON.parse(line) as {
    correct: number;
    wrong: number;
    dry: number;
    requests: number;
    errors: number;
    durationUs: number;
    p50Us: number;
    p99Us: number;
    sample: string;
  };
  return {
    correct: r.correct,
    wrong: r.wrong,
    // a use-once pool that ran dry before the end of a timed run: make the pool larger
    errors: r.errors + r.dry,
    requests: r.requests,
    seconds: r.durationUs / 1e6,
    p50: Math.round(r.p50Us / 100) / 10,
    p99: Math.round(r.p99Us / 100) / 10,
    ...(r.sample
      ? { sampleWrong: r.sample }
      : r.dry
        ? { sampleWrong: `pool ran dry (${r.dry} requests idle)` }
        : {}),
  };
}
