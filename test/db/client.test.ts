import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lockInfoFor } from '../../src/db/dataDirLock.js';
import { DataDirUnsafeError, findRunningServer } from '../../src/db/runningServer.js';
import { DatabaseBusyError, openDatabase } from '../../src/db/client.js';
import { redactUrl } from '../../src/db/redactUrl.js';

describe('openDatabase: the embedded data dir lock', () => {
  let root: string;
  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'attest-lock-'));
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  const dirWithLock = (name: string, content: string) => {
    const dir = join(root, name);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'attest.lock'), content);
    return dir;
  };

  it('a half-written lock counts as held, for the CLI and for a server', async () => {
    const dir = dirWithLock('half', '{"pi');
    await expect(openDatabase({ dataDir: dir, role: 'cli' })).rejects.toBeInstanceOf(
      DatabaseBusyError,
    );
    await expect(openDatabase({ dataDir: dir, role: 'server' })).rejects.toBeInstanceOf(
      DatabaseBusyError,
    );
    expect(existsSync(join(dir, 'attest.lock'))).toBe(true);
  });

  it('a live holder without an admin API (another CLI command) makes the CLI wait, with a message', async () => {
    const dir = dirWithLock('busy', JSON.stringify({ pid: process.pid }));
    const err = await openDatabase({ dataDir: dir, role: 'cli' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DatabaseBusyError);
    expect((err as Error).message).toMatch(
      new RegExp(`in use by process ${process.pid}.*wait for it to finish`),
    );
  });

  it('a lock left by a dead process is taken over, and released on close', async () => {
    const dead = spawnSync(process.execPath, ['-e', '']).pid;
    const dir = dirWithLock(
      'stale',
      JSON.stringify({ pid: dead, admin: { socket: '/nonexistent.sock', secret: 'x' } }),
    );
    const handle = await openDatabase({ dataDir: dir, role: 'cli' });
    try {
      expect(handle.kind).toBe('embedded');
      expect(JSON.parse(readFileSync(join(dir, 'attest.lock'), 'utf8'))).toEqual(lockInfoFor());
    } finally {
      await handle.close();
    }
    expect(existsSync(join(dir, 'attest.lock'))).toBe(false);
  });
});

describe('a dead server’s admin socket', () => {
  let root: string;
  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'attest-stale-'));
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it.skipIf(process.getuid?.() === undefined)(
    'is removed with its folder when the lock is taken over; a file that is not a private socket stays',
    async () => {
      const folder = join(root, 'attest-dead01');
      mkdirSync(folder, { mode: 0o700 });
      const socket = join(folder, 'admin.sock');
      // a process killed while listening leaves its socket file behind
      spawnSync(process.execPath, [
        '-e',
        `require('node:net').createServer().listen(${JSON.stringify(socket)}, () => process.kill(process.pid, 'SIGKILL'))`,
      ]);
      chmodSync(socket, 0o600);
      const other = join(root, 'keep.txt');
      writeFileSync(other, 'x');
      const dead = spawnSync(process.execPath, ['-e', '']).pid;
      for (const [name, path] of [
        ['a', socket],
        ['b', other],
      ] as const) {
        const dir = join(root, name);
        mkdirSync(dir, { mode: 0o700 });
        writeFileSync(
          join(dir, 'attest.lock'),
          JSON.stringify({ pid: dead, admin: { socket: path, secret: 's' } }),
        );
        await (await openDatabase({ dataDir: dir, role: 'cli' })).close();
      }
      expect(existsSync(folder)).toBe(false);
      expect(existsSync(other)).toBe(true);
    },
    60_000,
  );
});

describe('findRunningServer', () => {
  let root: string;
  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'attest-find-'));
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('names the admin API of a live holder; a holder without one, or a lock of the old PostgreSQL-socket kind, is no server', () => {
    const dir = (name: string, lock: unknown) => {
      const d = join(root, name);
      mkdirSync(d, { mode: 0o700 });
      writeFileSync(join(d, 'attest.lock'), JSON.stringify(lock), { mode: 0o600 });
      return d;
    };
    const admin = { socket: '/run/attest-x/admin.sock', secret: 's3cret' };
    expect(findRunningServer(dir('live', { pid: process.pid, admin }))).toEqual({
      pid: process.pid,
      admin,
    });
    expect(findRunningServer(dir('cli', { pid: process.pid }))).toBeNull();
    expect(
      findRunningServer(dir('old', { pid: process.pid, socket: { path: '/tmp/a/attest.sock' } })),
    ).toBeNull();
    expect(findRunningServer(join(root, 'absent'))).toBeNull();
  });

  it.skipIf(process.getuid?.() === undefined)(
    'refuses a data dir others may write to: they could have written the lock and its secret',
    () => {
      const d = join(root, 'open');
      mkdirSync(d, { mode: 0o700 });
      chmodSync(d, 0o777);
      expect(() => findRunningServer(d)).toThrow(DataDirUnsafeError);
    },
  );
});

describe('redactUrl', () => {
  it('hides the password and survives garbage', () => {
    expect(redactUrl('postgres://attest:s3cret@db:5432/attest')).toBe(
      'postgres://attest:***@db:5432/attest',
    );
    expect(redactUrl('postgres://db/attest')).toBe('postgres://db/attest');
    expect(redactUrl('::::')).not.toContain(':::');
  });
});
