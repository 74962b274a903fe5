import { Fault } from './core/fault.js';
import {
  existsSync,
  lstatSync,
  mkdtempSync,
  realpathSync,
  rmdirSync,
  rmSync,
  type Stats,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, parse, sep } from 'node:path';

/** The admin socket's file name, in a private folder of its own. */
export const ADMIN_SOCKET_FILE = 'admin.sock';
// sun_path holds 108 bytes on Linux, 104 on macOS
const MAX_SOCKET_PATH = 100;
const STICKY = 0o1000;

/** The admin socket cannot be made or used safely; the message is one line for the operator. */
export class SocketPathError extends Fault {
  override readonly name = 'SocketPathError';
  constructor(message: string) {
    super('socket_path', message);
  }
}

/**
 * The first problem `check` finds with a folder from `/` down to `dir`, or null. `dir` is resolved
 * first, so a symbolic link on the way cannot lead elsewhere.
 */
export function folderProblem(
  dir: string,
  check: (folder: string, stat: Stats) => string | null,
): string | null {
  let real: string;
  try {
    real = realpathSync(dir);
  } catch (err) {
    return `${dir} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`;
  }
  const { root } = parse(real);
  const parts = real.slice(root.length).split(sep).filter(Boolean);
  for (let i = 0; i <= parts.length; i++) {
    const folder = root + parts.slice(0, i).join(sep);
    const problem = check(folder, lstatSync(folder));
    if (problem) return problem;
  }
  return null;
}

/**
 * Why `dir` is not a folder only root and this user can change (so no one else can swap what
 * lies below it), or null when it is: each folder from `/` down to `dir` is owned by root or by
 * this user, and writable by others only when sticky (as /tmp, where no one may rename another
 * user's entries).
 */
export function untrustedFolder(dir: string): string | null {
  const uid = process.getuid?.();
  if (uid === undefined) return null; // Windows: no POSIX owners or modes
  return folderProblem(dir, (folder, st) => {
    if (st.uid !== 0 && st.uid !== uid)
      return `${folder} belongs to user ${st.uid}, who could replace what is below it`;
    if ((st.mode & 0o022) !== 0 && (st.mode & STICKY) === 0)
      return `${folder} is writable by other users (mode ${mode(st.mode)}) and not sticky`;
    return null;
  });
}

/**
 * A new 0700 folder for the admin socket under the first base that is short enough and that no
 * other user can change: XDG_RUNTIME_DIR (`preferred`), else the OS temporary folder, else /tmp.
 * Returns the socket's path inside it.
 */
export function createPrivateSocketPath(preferred: string | undefined): string {
  return join(
    createPrivateSocketFolder(preferred, ADMIN_SOCKET_FILE, 'the admin socket'),
    ADMIN_SOCKET_FILE,
  );
}

/**
 * A new 0700 folder, this user's, for a socket named `file` (`what`, for the message), under the
 * first of XDG_RUNTIME_DIR (`preferred`), the OS temporary folder and /tmp that is short enough for
 * a socket path and that no other user can change.
 */
export function createPrivateSocketFolder(
  preferred: string | undefined,
  file: string,
  what: string,
  options: {
    /** skip a base that another user cannot reach (for a folder given to another user) */
    reachableByOthers?: boolean;
  } = {},
): string {
  const bases = [preferred, tmpdir(), '/tmp'].filter((b): b is string => !!b);
  const refused: string[] = [];
  for (const base of bases) {
    // mkdtemp appends 6 characters to the prefix
    if (Buffer.byteLength(join(base, 'attest-XXXXXX', file)) >= MAX_SOCKET_PATH) {
      refused.push(`${base}: too long for a socket path`);
      continue;
    }
    if (!existsSync(base)) continue;
    const unsafe = untrustedFolder(base) ?? (options.reachableByOthers ? closedFolder(base) : null);
    if (unsafe) {
      refused.push(unsafe);
      continue;
    }
    // mkdtemp creates the folder 0700 and fails rather than reuse one that exists
    return mkdtempSync(join(realpathSync(base), 'attest-'));
  }
  throw new SocketPathError(
    `no folder for ${what} is both short and private (${refused.join('; ') || bases.join(', ')}): set XDG_RUNTIME_DIR or TMPDIR to a short folder of your own`,
  );
}

/** Why another user cannot reach `dir` (a folder on the way they may not enter), or null. */
function closedFolder(dir: string): string | null {
  return folderProblem(dir, (folder, st) =>
    (st.mode & 0o001) === 0 ? `${folder} is closed to other users` : null,
  );
}

/**
 * Checks, before the CLI connects, that `socketPath` (named by the lock file) is this user's
 * private socket: its folder a real directory (not a link) owned by this user with mode 0700
 * (nothing for group or others), the socket owned by this user and 0600, and nothing above the
 * folder changeable by another user. Returns the path to connect to, or throws SocketPathError.
 */
export function checkSocketPath(socketPath: string): string {
  const uid = process.getuid?.();
  if (uid === undefined) return socketPath;
  const folder = dirname(socketPath);
  const refuse = (why: string) =>
    new SocketPathError(
      `refusing the admin socket ${socketPath} that the lock file names: ${why}; stop "attest serve" and start it again (set XDG_RUNTIME_DIR to a folder of your own)`,
    );
  const above = untrustedFolder(dirname(folder));
  if (above) throw refuse(above);
  const real = join(realpathSync(dirname(folder)), basename(folder), basename(socketPath));
  const stat = (path: string) => {
    try {
      return lstatSync(path);
    } catch (err) {
      throw refuse(`${path} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    }
  };
  const dir = stat(dirname(real));
  if (dir.isSymbolicLink()) throw refuse(`its folder is a symbolic link`);
  if (!dir.isDirectory()) throw refuse(`its folder is not a directory`);
  if (dir.uid !== uid) throw refuse(`its folder belongs to user ${dir.uid}, not to you (${uid})`);
  if ((dir.mode & 0o077) !== 0)
    throw refuse(`its folder has mode ${mode(dir.mode)}, not 700 (others could reach it)`);
  const sock = stat(real);
  if (!sock.isSocket()) throw refuse(`it is not a socket`);
  if (sock.uid !== uid) throw refuse(`it belongs to user ${sock.uid}, not to you (${uid})`);
  if ((sock.mode & 0o077) !== 0) throw refuse(`it has mode ${mode(sock.mode)}, not 600`);
  return real;
}

/** Removes the socket and its private folder (only when empty, and only ours by name). */
export function removeSocket(socketPath: string): void {
  rmSync(socketPath, { force: true });
  const dir = dirname(socketPath);
  if (basename(dir).startsWith('attest-')) {
    try {
      rmdirSync(dir);
    } catch {
      // not empty or gone: leave it
    }
  }
}

function mode(m: number): string {
  return (m & 0o777).toString(8).padStart(3, '0');
}
