import { closeSync, openSync, readFileSync, rmSync, statSync, writeSync } from 'node:fs';
import { checkSocketPath, removeSocket } from '../socketPath.js';
import { writePrivateFile } from '../writePrivateFile.js';

/** The lock file in an embedded data dir, beside `pgdata`. */
export const LOCK_FILE = 'attest.lock';

/** Where the running server's admin API listens, and the secret that opens it. */
export interface AdminDoor {
  socket: string;
  secret: string;
}

/**
 * What the lock says about its holder. A pid alone proves nothing once the process is gone: the
 * Docker image runs node as pid 1, so after a SIGKILL the next container's server *is* pid 1.
 * The start time and boot id tell that process from any later one that reuses its pid.
 */
export interface LockInfo {
  pid: number;
  /** the holder's start, in clock ticks since boot (field 22 of /proc/<pid>/stat); Linux only */
  startTime?: string;
  /** /proc/sys/kernel/random/boot_id when the lock was written; Linux only */
  bootId?: string;
  /** the running server's admin API, once it listens */
  admin?: AdminDoor;
}

/** A lock whose holder is gone, and why the lock says so (for the log line that removes it). */
export interface StaleLock {
  path: string;
  pid: number;
  why: string;
}

/** A lock that still does not parse this long after it was written lost its writer mid-write. */
const HALF_WRITTEN_GRACE_MS = 10_000;
/** A lock without a start time (an older version's) this much older than its pid's process is not that process's. */
const LEGACY_SLACK_MS = 2_000;

/** Field 22 of /proc/<pid>/stat (the start in ticks since boot), or undefined off Linux or when unreadable. */
export function processStartTime(pid: number): string | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // the command name (field 2) is in parentheses and may hold spaces or ')': count from the last ')'
  const start = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  return start && /^\d+$/.test(start) ? start : undefined;
}

let ownBootId: string | null | undefined;
function bootId(): string | undefined {
  if (ownBootId === undefined) {
    try {
      ownBootId = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() || null;
    } catch {
      ownBootId = null;
    }
  }
  return ownBootId ?? undefined;
}

/** The lock content naming `pid` (this process by default) with what proves it. */
export function lockInfoFor(pid = process.pid): LockInfo {
  const startTime = processStartTime(pid);
  const boot = bootId();
  return { pid, ...(startTime ? { startTime } : {}), ...(boot ? { bootId: boot } : {}) };
}

/**
 * Takes the lock at `lockPath` (O_EXCL). A lock that cannot be written whole (a full disk) is
 * removed again: an empty lock would block every later start.
 */
export function acquireLock(lockPath: string, busy: (message: string) => Error): void {
  let fd: number;
  try {
    fd = openSync(lockPath, 'wx', 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') {
      throw busy(
        `the embedded database lock ${lockPath} was taken by another process just now; try again`,
      );
    }
    throw err;
  }
  try {
    writeSync(fd, JSON.stringify(lockInfoFor()));
  } catch (err) {
    closeSync(fd);
    rmSync(lockPath, { force: true });
    throw err;
  }
  closeSync(fd);
}

/** Rewrites the held lock with the admin API's address (and its secret): see writePrivateFile. */
export function announceInLock(lockPath: string, admin: AdminDoor): void {
  writePrivateFile(lockPath, JSON.stringify({ ...lockInfoFor(), admin } satisfies LockInfo));
}

/**
 * The holder the lock at `lockPath` names when that process is alive (pid 0: a lock being
 * written), or null. A stale lock (its process gone, or its pid now another process's) is
 * removed, with its admin socket when that is this user's own, and reported to `onStale`.
 */
export function readLiveLock(
  lockPath: string,
  onStale?: (stale: StaleLock) => void,
): LockInfo | null {
  let text: string;
  try {
    text = readFileSync(lockPath, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    // unreadable: another user's, or being replaced; never taken for stale
    return { pid: 0 };
  }
  let info: LockInfo;
  try {
    info = JSON.parse(text) as LockInfo;
  } catch {
    info = { pid: 0 };
  }
  if (!Number.isInteger(info.pid) || info.pid <= 0) {
    // half-written by a process that is starting: held, unless its writer has long been gone
    if (ageMs(lockPath) < HALF_WRITTEN_GRACE_MS) return { pid: 0 };
    return removeStale(lockPath, { pid: 0 }, 'it was never written whole', onStale);
  }
  // a lock of an older version (a PostgreSQL-protocol socket) names no admin API: not a door
  const admin =
    typeof info.admin?.socket === 'string' && typeof info.admin.secret === 'string'
      ? { socket: info.admin.socket, secret: info.admin.secret }
      : undefined;
  const held: LockInfo = {
    pid: info.pid,
    ...(typeof info.startTime === 'string' ? { startTime: info.startTime } : {}),
    ...(typeof info.bootId === 'string' ? { bootId: info.bootId } : {}),
    ...(admin ? { admin } : {}),
  };
  const why = staleBecause(held, lockPath);
  return why ? removeStale(lockPath, held, why, onStale) : held;
}

/** Why the lock's holder is not alive, or null when it is (as far as can be told). */
function staleBecause(info: LockInfo, lockPath: string): string | null {
  const boot = bootId();
  if (info.bootId && boot && info.bootId !== boot) return 'it was written before the last boot';
  if (!isAlive(info.pid)) return `process ${info.pid} is gone`;
  const actual = processStartTime(info.pid);
  if (actual === undefined) return null; // no /proc: the pid's liveness is all there is
  if (info.startTime !== undefined)
    return info.startTime === actual
      ? null
      : `pid ${info.pid} is now another process (started at tick ${actual}, the holder at ${info.startTime})`;
  // an older version's lock names a pid only: it cannot be that process's if it predates it
  const started = startedAtMs(actual);
  if (started !== undefined && mtimeMs(lockPath) < started - LEGACY_SLACK_MS)
    return `it predates process ${info.pid}, which now has that pid`;
  return null;
}

function removeStale(
  lockPath: string,
  info: LockInfo,
  why: string,
  onStale: ((stale: StaleLock) => void) | undefined,
): null {
  // its process died without cleaning up; its socket goes too, when it is ours to remove
  if (info.admin) removeStaleSocket(info.admin.socket);
  rmSync(lockPath, { force: true });
  onStale?.({ path: lockPath, pid: info.pid, why });
  return null;
}

/** Removes a dead server's socket and its folder, only when the checks say both are this user's own. */
function removeStaleSocket(path: string): void {
  try {
    removeSocket(checkSocketPath(path));
  } catch {
    // not ours, or gone: leave it
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function mtimeMs(path: string): number {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return Date.now();
  }
}

function ageMs(path: string): number {
  return Date.now() - mtimeMs(path);
}

/** Wall-clock start of a process from its start tick: boot time (btime in /proc/stat) plus ticks at 100 Hz (USER_HZ). */
function startedAtMs(startTicks: string): number | undefined {
  try {
    const btime = /^btime (\d+)$/m.exec(readFileSync('/proc/stat', 'utf8'))?.[1];
    return btime ? Number(btime) * 1000 + Number(startTicks) * 10 : undefined;
  } catch {
    return undefined;
  }
}
