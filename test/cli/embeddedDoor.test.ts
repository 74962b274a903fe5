/**
 * The embedded database has no door of its own: the running server's admin API is a unix socket
 * that only the data dir's owner can reach: never TCP (even for a long data dir), a 0700 folder of
 * its own, the socket 0600, a per-run secret in the 0600 lock file, and a data dir that other
 * users could tamper with is refused. Spawned binaries, real exit codes and stderr.
 */
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baseEnv, buildOnce, runBin, stopBin, watchBin, type Watched } from '../support/binary.js';

const isRoot = process.getuid?.() === 0;
const onLinux = process.platform === 'linux';
// uid/gid of `nobody` on Debian and most distributions; any uid that is not ours would do
const OTHER_UID = 65534;

/** TCP ports `pid` listens on (its socket inodes matched against the kernel's LISTEN table). */
function tcpListenPorts(pid: number): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]!);
    } catch {
      // closed meanwhile
    }
  }
  const ports: number[] = [];
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    if (!existsSync(table)) continue;
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length > 9 && f[3] === '0A' && inodes.has(f[9]!))
        ports.push(parseInt(f[1]!.split(':')[1]!, 16));
    }
  }
  return ports;
}

/** Connects to a unix socket from a child process, as `uid` when given; prints what happened. */
function connectAs(socketPath: string, uid?: number): string {
  const drop = uid === undefined ? '' : `process.setgid(${uid}); process.setuid(${uid});`;
  const script = `${drop} const s = require('node:net').connect(process.argv[1]);
    s.on('connect', () => { console.log('connected'); s.destroy(); });
    s.on('error', (e) => console.log(e.code));`;
  const run = spawnSync(process.execPath, ['-e', script, socketPath], {
    encoding: 'utf8',
    timeout: 20_000,
  });
  return run.stdout.trim() || run.stderr.trim();
}

function readAs(path: string, uid: number): string {
  const script = `process.setgid(${uid}); process.setuid(${uid});
    try { require('node:fs').readFileSync(process.argv[1]); console.log('read'); } catch (e) { console.log(e.code); }`;
  return spawnSync(process.execPath, ['-e', script, path], {
    encoding: 'utf8',
    timeout: 20_000,
  }).stdout.trim();
}

describe.skipIf(!onLinux)('the embedded database behind a long data dir path', () => {
  let root: string;
  let dataDir: string;
  let runDir: string;
  let env: NodeJS.ProcessEnv;
  let server: Watched;
  let port: number;

  beforeAll(async () => {
    buildOnce();
    root = mkdtempSync(join(tmpdir(), 'attest-door-'));
    // 88 bytes or more used to switch the socket to 127.0.0.1 TCP
    dataDir = join(root, 'x'.repeat(100));
    runDir = join(root, 'run');
    mkdirSync(runDir, { mode: 0o700 });
    env = baseEnv({ ATTEST_DATA_DIR: dataDir, XDG_RUNTIME_DIR: runDir });
    server = watchBin(['serve', '--port', '0', '--host', '127.0.0.1'], env);
    port = Number((await server.line(/attest listening on http:\/\/127\.0\.0\.1:(\d+)/)).match[1]);
  }, 120_000);
  afterAll(async () => {
    if (server) await stopBin(server);
    rmSync(root, { recursive: true, force: true });
  });

  it('listens on TCP only for HTTP: the database has no TCP door', () => {
    expect(Buffer.byteLength(dataDir)).toBeGreaterThanOrEqual(88);
    expect(tcpListenPorts(server.child.pid!)).toEqual([port]);
  });

  it('offers its admin API on a 0600 socket in a 0700 folder of its own, recorded with a secret in the 0600 lock file', () => {
    const lockPath = join(dataDir, 'attest.lock');
    expect(statSync(lockPath).mode & 0o777).toBe(0o600);
    const lock = JSON.parse(readFileSync(lockPath, 'utf8')) as {
      pid: number;
      admin: { socket: string; secret: string };
    };
    expect(lock.pid).toBe(server.child.pid);
    expect(Object.keys(lock.admin).sort()).toEqual(['secret', 'socket']);
    expect(lock.admin.secret.length).toBeGreaterThanOrEqual(40);
    expect(Buffer.byteLength(lock.admin.socket)).toBeLessThan(100);
    expect(dirname(dirname(lock.admin.socket))).toBe(runDir);
    const folder = statSync(dirname(lock.admin.socket));
    expect(folder.mode & 0o777).toBe(0o700);
    expect(folder.uid).toBe(process.getuid!());
    const socket = statSync(lock.admin.socket);
    expect(socket.isSocket()).toBe(true);
    expect(socket.mode & 0o777).toBe(0o600);
  });

  it('the socket works for the CLI (the same user)', async () => {
    const created = await runBin(['keys', 'create', '--name', 'through the socket', '--json'], env);
    expect(created.stderr).toBe('');
    expect(created.code).toBe(0);
    const lock = JSON.parse(readFileSync(join(dataDir, 'attest.lock'), 'utf8')) as {
      admin: { socket: string };
    };
    expect(connectAs(lock.admin.socket)).toBe('connected');
  });

  // the secret in the lock file authenticates the CLI; the file modes keep others from both
  it.skipIf(!isRoot)(
    'another OS user can neither connect to the socket nor read the lock file',
    () => {
      const lock = JSON.parse(readFileSync(join(dataDir, 'attest.lock'), 'utf8')) as {
        admin: { socket: string };
      };
      expect(connectAs(lock.admin.socket, OTHER_UID)).toBe('EACCES');
      expect(readAs(join(dataDir, 'attest.lock'), OTHER_UID)).toBe('EACCES');
    },
  );

  it('SIGTERM removes the socket, its folder and the lock', async () => {
    server.child.kill('SIGTERM');
    expect((await server.exited).code).toBe(0);
    expect(readdirSync(runDir)).toEqual([]);
    expect(existsSync(join(dataDir, 'attest.lock'))).toBe(false);
  }, 30_000);
});

describe.skipIf(!onLinux || !isRoot)('a data dir other users could tamper with is refused', () => {
  let root: string;
  beforeAll(() => {
    buildOnce();
    root = mkdtempSync(join(tmpdir(), 'attest-unsafe-'));
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it.each([
    [
      'group-writable',
      (dir: string) => chmodSync(dir, 0o770),
      /the data dir .* is writable by other users \(mode 770\): run "chmod go-w /,
    ],
    [
      'world-writable',
      (dir: string) => chmodSync(dir, 0o707),
      /the data dir .* is writable by other users \(mode 707\)/,
    ],
    [
      'owned by another user',
      (dir: string) => chownSync(dir, OTHER_UID, OTHER_UID),
      new RegExp(`the data dir .* belongs to user ${OTHER_UID}, not to you \\(0\\)`),
    ],
  ] as const)(
    '%s: serve and keys list exit 3 with one line, and open nothing',
    async (name, spoil, message) => {
      const dir = join(root, name.replace(/ /g, '-'));
      mkdirSync(dir, { mode: 0o700 });
      spoil(dir);
      const env = baseEnv({ ATTEST_DATA_DIR: dir });
      const [serve, list] = await Promise.all([
        runBin(['serve', '--port', '0', '--host', '127.0.0.1'], env),
        runBin(['keys', 'list'], env),
      ]);
      for (const run of [serve, list]) {
        expect(run.code).toBe(3);
        expect(run.stdout).toBe('');
        const lines = run.stderr.split('\n').filter(Boolean);
        expect(lines).toHaveLength(1);
        expect(lines[0]).toMatch(/^attest: /);
        expect(lines[0]).toMatch(message);
      }
      expect(readdirSync(dir)).toEqual([]);
    },
    60_000,
  );
});
