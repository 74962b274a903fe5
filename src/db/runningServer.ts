import { existsSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { checkSocketPath, removeSocket } from '../admin/socketPath.js';

// The embedded database's lock file and the running server it names. Apart from client.ts (which
// re-exports it) so that a CLI command that talks to a running server (`attest keys list`) does
// not load the database drivers.

/** Where the running server's admin API listens, and the secret that opens it. */
export interface AdminDoor {
  socket: string;
  secret: string;
}

/** The data dir is not private to this user, or the socket cannot be made private: nothing was opened. */
export class DataDirUnsafeError extends Error {
  override readonly name = 'DataDirUnsafeError';
}

/** The lock file beside the embedded database: who holds it, and the server's admin API. */
export const LOCK_FILE = 'attest.lock';

export interface LockInfo {
  pid: number;
  /** the running server's admin API, once it listens */
  admin?: AdminDoor;
}

/** A running `attest serve` that holds the embedded database in `dataDir`, if there is one. */
export interface RunningServer {
  pid: number;
  admin: AdminDoor;
}

/**
 * The live `attest serve` holding the embedded database in `dataDir` with its admin API, or null
 * (no lock, a stale one, or a holder without an admin API: another CLI command, or a server that
 * is still starting).
 */
export function findRunningServer(dataDir: string): RunningServer | null {
  const dir = resolve(dataDir);
  if (!existsSync(dir)) return null;
  // another user who may write here could have written the lock, and the secret in it
  assertPrivate(dir);
  const holder = readLiveLock(join(dir, LOCK_FILE));
  return holder?.admin ? { pid: holder.pid, admin: holder.admin } : null;
}

/** Refuses a data dir another user owns or may write to (DataDirUnsafeError). */
export function assertPrivate(dataDir: string): void {
  const uid = process.getuid?.();
  if (uid === undefined) return; // Windows: no POSIX owners or modes
  const st = statSync(dataDir);
  if (st.uid !== uid) {
    throw new DataDirUnsafeError(
      `the data dir ${dataDir} belongs to user ${st.uid}, not to you (${uid}): use a folder of your own (ATTEST_DATA_DIR)`,
    );
  }
  if ((st.mode & 0o022) !== 0) {
    const mode = (st.mode & 0o777).toString(8).padStart(3, '0');
    throw new DataDirUnsafeError(
      `the data dir ${dataDir} is writable by other users (mode ${mode}): run "chmod go-w ${dataDir}" (or chmod 700)`,
    );
  }
}

/** What the lock file of an embedded data dir says about the process that holds it. */
export interface LockHolder {
  pid: number;
  /** the address it serves the CLI on (its private admin socket), when it is a server */
  address?: string;
}

/**
 * The live process holding the embedded database in `dataDir`, as its lock file says, or null.
 * The one reader of the lock for reports (`attest status`): a stale lock is cleared as openDatabase would.
 */
export function lockHolder(dataDir: string): LockHolder | null {
  const lockPath = join(resolve(dataDir), LOCK_FILE);
  if (!existsSync(lockPath)) return null;
  const info = readLiveLock(lockPath);
  if (!info) return null;
  return { pid: info.pid, ...(info.admin ? { address: info.admin.socket } : {}) };
}

/** The live holder of a lock file, or null (a stale lock is removed with its socket). */
export function readLiveLock(lockPath: string): LockInfo | null {
  let info: LockInfo;
  try {
    info = JSON.parse(readFileSync(lockPath, 'utf8')) as LockInfo;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    // half-written by a process that is starting: treat as held, not as stale
    return { pid: 0 };
  }
  if (!Number.isInteger(info.pid) || info.pid <= 0) return { pid: 0 };
  // a lock of an older version (a PostgreSQL-protocol socket) names no admin API: not a door
  const admin =
    typeof info.admin?.socket === 'string' && typeof info.admin.secret === 'string'
      ? { socket: info.admin.socket, secret: info.admin.secret }
      : undefined;
  if (info.pid === process.pid || isAlive(info.pid))
    return { pid: info.pid, ...(admin ? { admin } : {}) };
  // stale: its process died without cleaning up; its socket goes too, when it is ours to remove
  if (admin) removeStaleSocket(admin.socket);
  rmSync(lockPath, { force: true });
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
