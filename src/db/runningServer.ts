import { Fault } from '../core/fault.js';
import { existsSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { LOCK_FILE, readLiveLock, type AdminDoor } from './dataDirLock.js';

// The running server a data dir's lock names. Apart from client.ts (the opener) so that
// a CLI command that talks to a running server (`attest keys list`) loads no database driver.

/** The data dir is not private to this user, or the socket cannot be made private: nothing was opened. */
export class DataDirUnsafeError extends Fault {
  override readonly name = 'DataDirUnsafeError';
  constructor(message: string) {
    super('data_dir_unsafe', message, { exit: 3 });
  }
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

/** Refuses a data dir that another user owns or may write to: they could swap the lock or the data. */
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
