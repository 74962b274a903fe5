/**
 * The embedded data dir's lock proves its holder: a pid that now belongs to another process (the
 * Docker image's pid 1 after a SIGKILL, or this very process) is never taken for a live server.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseBusyError, openDatabase } from '../../src/db/client.js';
import {
  acquireLock,
  lockInfoFor,
  processStartTime,
  readLiveLock,
  type StaleLock,
} from '../../src/db/dataDirLock.js';

const linux = existsSync('/proc/self/stat') && processStartTime(process.pid) !== undefined;

describe.skipIf(!linux)('the data dir lock on Linux', () => {
  let root: string;
  let n = 0;
  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'attest-lockproof-'));
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  const dirWithLock = (lock: unknown, mtime?: Date) => {
    const dir = join(root, `d${n++}`);
    mkdirSync(dir, { mode: 0o700 });
    const path = join(dir, 'attest.lock');
    writeFileSync(path, typeof lock === 'string' ? lock : JSON.stringify(lock), { mode: 0o600 });
    if (mtime) utimesSync(path, mtime, mtime);
    return { dir, path };
  };

  /** The stale locks reading the lock in `dir` reported (it must have found no live holder). */
  const staleIn = (dir: string) => {
    const stale: StaleLock[] = [];
    expect(readLiveLock(join(dir, 'attest.lock'), (s) => stale.push(s))).toBeNull();
    expect(existsSync(join(dir, 'attest.lock'))).toBe(false);
    return stale;
  };

  /** Opens and closes the embedded database over `dir`, returning the stale locks it reported. */
  const takeOver = async (dir: string) => {
    const stale: StaleLock[] = [];
    const handle = await openDatabase({
      dataDir: dir,
      role: 'server',
      onStaleLock: (s) => stale.push(s),
    });
    expect(JSON.parse(readFileSync(join(dir, 'attest.lock'), 'utf8'))).toEqual(lockInfoFor());
    await handle.close();
    return stale;
  };

  it('a lock naming a live pid (this process, or pid 1) with another start time is taken over, with a log line', async () => {
    for (const pid of [process.pid, 1]) {
      const started = processStartTime(pid);
      expect(started).toBeDefined();
      const { dir, path } = dirWithLock({
        ...lockInfoFor(pid),
        startTime: String(Number(started) + 1),
        admin: { socket: '/nonexistent/admin.sock', secret: 'x' },
      });
      // the Docker case end to end once (pid 1); this process's own pid at the lock level
      const stale = pid === 1 ? await takeOver(dir) : staleIn(dir);
      expect(stale).toEqual([
        { path, pid, why: expect.stringMatching(new RegExp(`^pid ${pid} is now another process`)) },
      ]);
    }
  }, 60_000);

  it('an older version’s lock ({"pid":1}, or this pid) written before that process started is taken over', async () => {
    for (const pid of [1, process.pid]) {
      const { dir, path } = dirWithLock({ pid }, new Date(0));
      expect(staleIn(dir)).toEqual([
        { path, pid, why: `it predates process ${pid}, which now has that pid` },
      ]);
    }
  }, 60_000);

  it('a lock written before the last boot is stale whatever its pid', () => {
    const { path } = dirWithLock({ ...lockInfoFor(), bootId: 'another-boot' });
    const stale: StaleLock[] = [];
    expect(readLiveLock(path, (s) => stale.push(s))).toBeNull();
    expect(stale[0]?.why).toBe('it was written before the last boot');
    expect(existsSync(path)).toBe(false);
  });

  it('a lock that never parsed long after it was written is stale; a fresh one is a process starting', () => {
    const fresh = dirWithLock('');
    expect(readLiveLock(fresh.path)).toEqual({ pid: 0 });
    const old = dirWithLock('', new Date(Date.now() - 60_000));
    const stale: StaleLock[] = [];
    expect(readLiveLock(old.path, (s) => stale.push(s))).toBeNull();
    expect(stale[0]?.why).toBe('it was never written whole');
  });

  it('a genuinely live holder is refused until it is gone, then taken over', async () => {
    const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1e9)'], {
      stdio: 'ignore',
    });
    await once(child, 'spawn');
    const admin = { socket: '/nonexistent/admin.sock', secret: 's' };
    const { dir, path } = dirWithLock({ ...lockInfoFor(child.pid!), admin });
    try {
      expect(readLiveLock(path)).toEqual({ ...lockInfoFor(child.pid!), admin });
      const err = await openDatabase({ dataDir: dir, role: 'server' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(DatabaseBusyError);
      expect((err as Error).message).toContain(`in use by process ${child.pid}`);
    } finally {
      child.kill('SIGKILL');
      await once(child, 'exit');
    }
    expect(staleIn(dir)).toEqual([{ path, pid: child.pid, why: `process ${child.pid} is gone` }]);
  }, 60_000);

  it('the lock this process takes holds against this process too (a second open in-process is refused)', () => {
    const dir = join(root, `d${n++}`);
    mkdirSync(dir, { mode: 0o700 });
    const path = join(dir, 'attest.lock');
    acquireLock(path, (m) => new DatabaseBusyError(m));
    expect(readLiveLock(path)).toEqual(lockInfoFor());
    expect(() => acquireLock(path, (m) => new DatabaseBusyError(m))).toThrow(DatabaseBusyError);
  });
});
