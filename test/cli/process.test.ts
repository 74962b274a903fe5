/**
 * The built binary in real processes: `serve` owning the embedded data dir while other commands
 * go through its socket, a second `serve` refused, and output piped into `head`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildOnce } from '../support/binary.js';

const ROOT = join(import.meta.dirname, '..', '..');
const BIN = join(ROOT, 'bin', 'attest.js');



interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

let env: NodeJS.ProcessEnv;

function attest(args: string[], input?: string): Promise<Result> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.stdin.end(input ?? '');
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

function sh(script: string): Promise<Result> {
  return new Promise((resolve) => {
    const child = spawn('bash', ['-c', script], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** starts `attest serve` and resolves with its URL once it listens */
function serve(): Promise<{ child: ChildProcess; url: string; exited: Promise<number | null> }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--host', '127.0.0.1'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    let stderr = '';
    child.stderr!.on('data', (d) => {
      stderr += d;
      const m = /attest listening on (http:\/\/\S+)/.exec(stderr);
      if (m) resolve({ child, url: m[1]!, exited });
    });
    void exited.then((code) => reject(new Error(`serve exited ${code}: ${stderr}`)));
  });
}

describe('the attest binary on one embedded data dir', () => {
  let dir: string;
  let server: Awaited<ReturnType<typeof serve>> | undefined;

  beforeAll(async () => {
    buildOnce();
    dir = mkdtempSync(join(tmpdir(), 'attest-bin-'));
    env = { PATH: process.env.PATH, HOME: process.env.HOME, ATTEST_DATA_DIR: join(dir, 'data'), LOG_LEVEL: 'warn' };
    server = await serve();
  }, 60_000);
  afterAll(async () => {
    if (server && server.child.exitCode === null) {
      server.child.kill('SIGTERM');
      await server.exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('keys create goes through the running server’s socket, and the key works there', async () => {
    const run = await attest(['keys', 'create', '--name', 'rp', '--json']);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const created = JSON.parse(run.stdout) as { key: string };
    const res = await fetch(`${server!.url}/api/v1/attestation/init`, { method: 'POST', headers: { 'X-Api-Key': created.key } });
    expect(res.status).toBe(200);
    const allow = await attest(['allowlist', 'add', 'apple', 'ABCDE12345.com.example.bank', '--json']);
    expect(allow.code).toBe(0);
    const status = await attest(['db', 'status', '--json']);
    expect((JSON.parse(status.stdout) as { applied: boolean }[]).every((m) => m.applied)).toBe(true);
  });

  it('a second serve on the same data dir fails with one clear line, exit 3', async () => {
    const second = await attest(['serve', '--port', '0', '--host', '127.0.0.1']);
    expect(second.code).toBe(3);
    expect(second.stdout).toBe('');
    const lines = second.stderr.split('\n').filter(Boolean);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^attest: the embedded database in .* is in use by process ${server!.child.pid}.*ATTEST_DATA_DIR`));
    // and the first server is unharmed
    expect((await fetch(`${server!.url}/readyz`)).status).toBe(200);
  });

  it('keys list piped into head exits cleanly (no EPIPE noise, exit 0)', async () => {
    // enough rows that the output outlives head: written straight into the database through the socket
    const lock = JSON.parse(readFileSync(join(dir, 'data', 'attest.lock'), 'utf8')) as { socket: { path: string } };
    const sql = postgres({ path: lock.socket.path, username: 'postgres', database: 'postgres', max: 1, onnotice: () => {} });
    await sql`insert into api_keys (id, name, hash) select 'bulk' || lpad(i::text, 12, '0'), 'bulk key ' || i, 'x' from generate_series(1, 3000) as i`;
    await sql.end();
    for (const command of ['keys list', 'keys list --json']) {
      const run = await sh(`node ${BIN} ${command} | head -1; echo "exit=\${PIPESTATUS[0]}"`);
      const lines = run.stdout.split('\n').filter(Boolean);
      expect(lines).toHaveLength(2);
      expect(lines[1]).toBe('exit=0');
      expect(run.stderr).toBe('');
    }
  });

  it('SIGTERM stops serve cleanly and frees the data dir', async () => {
    server!.child.kill('SIGTERM');
    expect(await server!.exited).toBe(0);
    expect(existsSync(join(dir, 'data', 'attest.lock'))).toBe(false);
    // with no server the CLI opens the directory itself
    const list = await attest(['keys', 'list', '--json']);
    expect(list.code).toBe(0);
    expect((JSON.parse(list.stdout) as unknown[]).length).toBeGreaterThan(3000);
  }, 20_000);
});

describe('the attest binary outside its checkout', () => {
  it('--version prints the package’s own version, not the npm project’s it runs in', async () => {
    buildOnce();
    const cwd = mkdtempSync(join(tmpdir(), 'attest-version-'));
    try {
      const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
      // npm exec (npx) sets npm_package_version to the surrounding project's version
      const run = await new Promise<Result>((resolve) => {
        const child = spawn(process.execPath, [BIN, '--version'], { cwd, env: { PATH: process.env.PATH, npm_package_version: '9.9.9' } });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (d) => (stdout += d));
        child.stderr.on('data', (d) => (stderr += d));
        child.on('close', (code) => resolve({ code, stdout, stderr }));
      });
      expect(run).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' });
    } finally {
      rmSync(cwd, { recursive: true, force: true });
    }
  });
});
