/**
 * The embedded database as an appliance (issue 44), tried as its users and its attackers would:
 * as root its server runs as a user of its own that no other account shares, so `nobody` can
 * neither enter its folder nor reach its socket; a planted postmaster.pid and socket get no
 * password; a postmaster killed under load comes back by itself; the first start after a crash
 * is ready; and a data dir path of any length works. Real processes, real signals.
 *
 * Builds its data dirs by hand (not from test/support/fixtures.ts): made by the binary as root, in
 * a folder of given modes and path lengths, they are what it tests.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rootOnlyPath } from '../../src/db/embeddedBinaries.js';
import { PASSWORD_FILE, PG_DIR, SOCKET_FILE } from '../../src/db/embeddedServer.js';
import { DATABASE_USER } from '../../src/db/embeddedUser.js';
import { baseEnv, buildOnce, runBin, serveBin, stopBin, type Served } from '../support/binary.js';

const isRoot = process.getuid?.() === 0;
const onLinux = process.platform === 'linux';
const hasSetpriv = spawnSync('setpriv', ['--version']).status === 0;

/** postmaster.pid: the pid (line 1) and the socket folder (line 5). */
function postmaster(dataDir: string): { pid: number; socketFolder: string } {
  const lines = readFileSync(join(dataDir, PG_DIR, 'postmaster.pid'), 'utf8').split('\n');
  return { pid: Number(lines[0]), socketFolder: lines[4]! };
}

function uidOf(pid: number): number {
  const m = /^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m![1]);
}

/** Runs `command` as nobody (setpriv), with no groups: what any daemon sharing that account could do. */
function asNobody(command: string[]): { code: number | null; out: string } {
  const run = spawnSync(
    'setpriv',
    ['--reuid=nobody', '--regid=nogroup', '--clear-groups', ...command],
    { encoding: 'utf8', timeout: 20_000 },
  );
  return { code: run.status, out: `${run.stdout}${run.stderr}`.trim() };
}

async function newKey(env: NodeJS.ProcessEnv): Promise<string> {
  const created = await runBin(['keys', 'create', '--name', 'rp', '--json'], env);
  expect(created.code, created.stderr).toBe(0);
  return (JSON.parse(created.stdout) as { key: string }).key;
}

/** One init; the status, or 'timeout' / 'reset' when it got no answer within 10 s. */
async function init(url: string, key: string): Promise<number | 'timeout' | 'reset'> {
  try {
    const res = await fetch(`${url}/api/v1/attestation/init`, {
      method: 'POST',
      headers: { 'X-Api-Key': key },
      signal: AbortSignal.timeout(10_000),
    });
    await res.arrayBuffer();
    if (res.status >= 500) expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
    return res.status;
  } catch (err) {
    return (err as Error).name === 'TimeoutError' ? 'timeout' : 'reset';
  }
}

/** `attest serve` answers an init with a new key, then stops on SIGTERM with exit 0. */
async function serveAndAnswer(env: NodeJS.ProcessEnv): Promise<void> {
  const server = await serveBin(env);
  try {
    const key = await newKey(env);
    expect(await init(server.url, key)).toBe(200);
  } finally {
    await stopBin(server);
  }
  expect((await server.exited).code).toBe(0);
}

describe.skipIf(!onLinux)('the embedded database as an appliance', () => {
  let root: string;
  beforeAll(() => {
    buildOnce();
    // a private folder, as `mktemp -d` and root's home are: nobody may not traverse it
    root = mkdtempSync(join(tmpdir(), 'attest-appliance-'));
    expect(statSync(root).mode & 0o777).toBe(0o700);
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  describe.skipIf(!isRoot || !hasSetpriv)('as root', () => {
    let dataDir: string;
    let env: NodeJS.ProcessEnv;
    let server: Served | undefined;
    beforeAll(async () => {
      dataDir = join(root, 'as-root');
      env = baseEnv({ ATTEST_DATA_DIR: dataDir });
      server = await serveBin(env);
    }, 120_000);
    afterAll(async () => {
      if (server) await stopBin(server);
    });

    it(`its server runs as ${DATABASE_USER}, from binaries only root can change`, () => {
      const { pid } = postmaster(dataDir);
      const getent = spawnSync('getent', ['passwd', DATABASE_USER], { encoding: 'utf8' });
      const uid = Number(getent.stdout.split(':')[2]);
      expect(uid).toBeGreaterThan(0);
      expect(uidOf(pid)).toBe(uid);
      const nobody = Number(
        spawnSync('id', ['-u', 'nobody'], { encoding: 'utf8' }).stdout.trim() || 65534,
      );
      expect(uidOf(pid)).not.toBe(nobody);
      const exe = readlinkSync(`/proc/${pid}/exe`);
      expect(rootOnlyPath(join(exe, '..'))).toBeNull();
      expect(statSync(join(dataDir, PG_DIR)).mode & 0o777).toBe(0o700);
    });

    it('nobody cannot list its folder, enter it through /proc, read its files or reach its socket', () => {
      const { pid, socketFolder } = postmaster(dataDir);
      for (const path of [
        join(dataDir, PG_DIR),
        `/proc/${pid}/cwd`,
        `/proc/${pid}/cwd/`,
        socketFolder,
      ]) {
        const ls = asNobody(['ls', path]);
        expect(ls.code, path).not.toBe(0);
        expect(ls.out, path).toMatch(/Permission denied/);
      }
      const read = asNobody(['cat', `/proc/${pid}/cwd/pg_hba.conf`]);
      expect(read.code).not.toBe(0);
      const connect = asNobody([
        process.execPath,
        '-e',
        `require('node:net').connect(process.argv[1]).on('connect', () => { console.log('connected'); process.exit(0) }).on('error', (e) => { console.log(e.code); process.exit(1) })`,
        join(socketFolder, SOCKET_FILE),
      ]);
      expect(connect.out).toMatch(/EACCES/);
      expect(statSync(socketFolder).mode & 0o777).toBe(0o700);
    });

    it('after it stops, nobody still cannot enter the folder it left', async () => {
      await stopBin(server!);
      server = undefined;
      const ls = asNobody(['ls', join(dataDir, PG_DIR)]);
      expect(ls.code).not.toBe(0);
    }, 60_000);
  });

  it('a planted postmaster.pid that says "ready" and a fake socket get no password', async () => {
    const dataDir = join(root, 'planted');
    const env = baseEnv({ ATTEST_DATA_DIR: dataDir });
    const made = await runBin(['db', 'migrate'], env);
    expect(made.code, made.stderr).toBe(0);
    const pgDir = join(dataDir, PG_DIR);
    const password = readFileSync(join(dataDir, PASSWORD_FILE), 'utf8').trim();
    // a fake server on the socket attest used to connect to: it asks for the password in clear
    // (AuthenticationCleartextPassword) and writes down what it is sent
    const captured = join(root, 'captured');
    const fake: ChildProcess = spawn(
      process.execPath,
      [
        '-e',
        `const fs = require('node:fs');
         const server = require('node:net').createServer((s) => {
           fs.appendFileSync(process.argv[2], 'CONNECTED\\n');
           s.on('data', (d) => { fs.appendFileSync(process.argv[2], d); s.write(Buffer.from([0x52, 0, 0, 0, 8, 0, 0, 0, 3])); });
         });
         server.listen(process.argv[1], () => console.log('listening'));`,
        join(pgDir, SOCKET_FILE),
        captured,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'], cwd: root },
    );
    try {
      await new Promise<void>((resolve, reject) => {
        fake.stdout!.on('data', (d: Buffer) => d.toString().includes('listening') && resolve());
        fake.once('exit', (code) => reject(new Error(`the fake server exited ${code}`)));
      });
      const now = Math.floor(Date.now() / 1000);
      // the format of postmaster.pid: pid, data dir, start time, port, socket folder, listen
      // address, shared memory key, status
      const lines = [fake.pid, pgDir, now, 5432, pgDir, '', '0 0', 'ready', ''];
      spawnSync('sh', ['-c', `cat > "$0"`, join(pgDir, 'postmaster.pid')], {
        input: lines.join('\n'),
      });
      await serveAndAnswer(env);
      let got = '';
      try {
        got = readFileSync(captured, 'latin1');
      } catch {
        // never connected
      }
      expect(got).not.toContain(password);
      expect(got).toBe('');
    } finally {
      fake.kill('SIGKILL');
    }
  }, 120_000);

  it('three crashes in a row (attest and its postmaster SIGKILLed): each next start is ready first time', async () => {
    const dataDir = join(root, 'crashes');
    const env = baseEnv({ ATTEST_DATA_DIR: dataDir });
    let server = await serveBin(env);
    const key = await newKey(env);
    for (let cycle = 1; cycle <= 3; cycle++) {
      expect(await init(server.url, key)).toBe(200);
      const { pid } = postmaster(dataDir);
      process.kill(pid, 'SIGKILL');
      server.child.kill('SIGKILL');
      await server.exited;
      server = await serveBin(env);
      expect(await init(server.url, key), `cycle ${cycle}`).toBe(200);
    }
    await stopBin(server);
  }, 240_000);

  it.each([
    ['one process', [] as string[]],
    ['--workers 2', ['--workers', '2']],
  ])(
    '%s: a postmaster SIGKILLed under load is started again and requests are answered within 15 s, none hangs',
    async (_name, extra) => {
      const dataDir = join(root, `killed-${extra.length}`);
      const env = baseEnv({ ATTEST_DATA_DIR: dataDir, LOG_LEVEL: 'info' });
      const server = await serveBin(env, extra);
      try {
        const key = await newKey(env);
        // the workers read the new key once the change reaches them
        await expect.poll(() => init(server.url, key), { timeout: 10_000 }).toBe(200);
        const answers: { at: number; status: number | 'timeout' | 'reset' }[] = [];
        let running = true;
        const loop = async () => {
          while (running) answers.push({ status: await init(server.url, key), at: Date.now() });
        };
        const loops = Array.from({ length: 8 }, loop);
        await expect.poll(() => answers.length, { timeout: 30_000 }).toBeGreaterThan(50);
        const { pid } = postmaster(dataDir);
        const killedAt = Date.now();
        process.kill(pid, 'SIGKILL');
        await expect
          .poll(() => answers.some((a) => a.at > killedAt && a.status !== 200), { timeout: 15_000 })
          .toBe(true);
        await expect
          .poll(
            () => {
              const last = answers.slice(-20);
              return last.length === 20 && last.every((a) => a.at > killedAt && a.status === 200);
            },
            { timeout: 15_000, interval: 50 },
          )
          .toBe(true);
        running = false;
        await Promise.all(loops);
        const after = answers.filter((a) => a.at > killedAt);
        expect(after.filter((a) => a.status === 'timeout' || a.status === 'reset')).toEqual([]);
        const back = after.find((a, i) => after.slice(i, i + 20).every((b) => b.status === 200));
        // eslint-disable-next-line no-console
        console.log(
          `${_name}: answers again ${back!.at - killedAt} ms after the SIGKILL (${after.filter((a) => a.status !== 200).length} answered "unavailable" meanwhile)`,
        );
        expect(postmaster(dataDir).pid).not.toBe(pid);
        await server.logLine((l) => l.msg === 'the embedded database is back');
        const exited = server.logs().find((l) => String(l.msg).includes('exited unasked'));
        expect(exited?.signal).toBe('SIGKILL');
      } finally {
        await stopBin(server);
      }
      expect((await server.exited).code).toBe(0);
    },
    180_000,
  );

  it('a data dir path of 150 characters works', async () => {
    const base = join(root, 'long');
    mkdirSync(base, { recursive: true });
    const dataDir = join(base, 'd'.repeat(Math.max(1, 150 - base.length - 1)));
    expect(dataDir.length).toBeGreaterThanOrEqual(150);
    const env = baseEnv({ ATTEST_DATA_DIR: dataDir });
    await serveAndAnswer(env);
  }, 120_000);
});
