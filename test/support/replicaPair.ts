/**
 * A PostgreSQL primary and its synchronous streaming standby, made from the machine's PostgreSQL
 * binaries (Debian's /usr/lib/postgresql/<version>/bin, or TEST_PG_BIN) in a temporary folder on
 * two free loopback ports, for the failover test. PostgreSQL refuses to run as root: as root the
 * binaries run as the `postgres` user (runuser). Nothing of the machine's own PostgreSQL is used.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { appendFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';

/** The folder of initdb, pg_ctl and pg_basebackup: TEST_PG_BIN, else Debian's newest. */
function binDir(): string | undefined {
  if (process.env.TEST_PG_BIN) return process.env.TEST_PG_BIN;
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] ? join(root, versions[0], 'bin') : undefined;
}

/** The postgres user's uid and gid when this process is root (PostgreSQL refuses root). */
function postgresUser(): { uid: number; gid: number } | undefined {
  const id = (flag: string) =>
    spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout.trim();
  const uid = Number(id('-u'));
  const gid = Number(id('-g'));
  return id('-u') && Number.isInteger(uid) ? { uid, gid } : undefined;
}

/** Why the pair cannot be made here (the test skips with it), or undefined when it can. */
export function replicaPairMissing(): string | undefined {
  const bin = binDir();
  if (
    !bin ||
    !['initdb', 'pg_ctl', 'pg_basebackup', 'postgres'].every((b) => existsSync(join(bin, b)))
  )
    return 'no PostgreSQL server binaries (initdb, pg_ctl, pg_basebackup: Debian postgresql-15, or TEST_PG_BIN)';
  if (process.getuid?.() === 0 && !postgresUser())
    return 'run as root and there is no postgres user to run PostgreSQL as';
  return undefined;
}

async function freePort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

export interface ReplicaPair {
  primaryPort: number;
  standbyPort: number;
  /** the superuser's URL of one server's database `db` (the test's own checks) */
  adminUrl(port: number, db?: string): string;
  /** kill -9 the primary's postmaster (its backends die with it: no shutdown, no final WAL) */
  killPrimary(): void;
  /** `pg_ctl promote -w` on the standby: it takes writes when this returns */
  promote(): void;
  stop(): void;
}

/**
 * Starts the pair: the primary lists the standby in synchronous_standby_names (a commit returns
 * once the standby has flushed it: synchronous_commit on), the standby streams from it. The
 * standby keeps that setting, as a copy of the primary does: promoted, its commits wait for a
 * standby of its own until a failover manager clears it (the test does).
 */
export async function startReplicaPair(
  options: { maxConnections?: number } = {},
): Promise<ReplicaPair> {
  const bin = binDir()!;
  const asRoot = process.getuid?.() === 0;
  const user = asRoot ? postgresUser() : undefined;
  const dir = mkdtempSync(join(tmpdir(), 'attest-failover-'));
  if (user) chownSync(dir, user.uid, user.gid);
  const run = (tool: string, args: string[]) =>
    execFileSync(
      user ? 'runuser' : join(bin, tool),
      user ? ['-u', 'postgres', '--', join(bin, tool), ...args] : args,
      {
        stdio: ['ignore', 'pipe', 'pipe'],
        cwd: dir,
      },
    );
  const [primaryPort, standbyPort] = [await freePort(), await freePort()];
  const primary = join(dir, 'primary');
  const standby = join(dir, 'standby');
  run('initdb', ['-D', primary, '-U', 'postgres', '--auth=trust', '-N']);
  appendFileSync(
    join(primary, 'postgresql.conf'),
    [
      `port = ${primaryPort}`,
      `listen_addresses = '127.0.0.1'`,
      `unix_socket_directories = '${dir}'`,
      'wal_level = replica',
      `max_connections = ${options.maxConnections ?? 40}`,
      'shared_buffers = 16MB',
      `synchronous_standby_names = 'standby'`,
      // the test kills postgres, never the machine: the OS keeps what was written
      'fsync = off',
      '',
    ].join('\n'),
  );
  const pgCtl = (data: string, ...args: string[]) =>
    run('pg_ctl', ['-D', data, '-l', `${data}.log`, '-w', '-t', '30', ...args]);
  pgCtl(primary, 'start');
  try {
    run('pg_basebackup', [
      '-h',
      '127.0.0.1',
      '-p',
      String(primaryPort),
      '-U',
      'postgres',
      '-D',
      standby,
      '-R',
      '-X',
      'stream',
    ]);
    appendFileSync(
      join(standby, 'postgresql.auto.conf'),
      `port = ${standbyPort}\nprimary_conninfo = 'host=127.0.0.1 port=${primaryPort} user=postgres application_name=standby'\n`,
    );
    pgCtl(standby, 'start');
  } catch (err) {
    spawnSync(user ? 'runuser' : join(bin, 'pg_ctl'), [
      ...(user ? ['-u', 'postgres', '--', join(bin, 'pg_ctl')] : []),
      '-D',
      primary,
      '-m',
      'immediate',
      'stop',
    ]);
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const adminUrl = (port: number, db = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${db}`;
  // wait until the standby streams synchronously: before, the primary's commits wait for it
  const admin = postgres(adminUrl(primaryPort), { max: 1, onnotice: () => {} });
  try {
    for (let i = 0; ; i++) {
      const rows =
        await admin`select 1 from pg_stat_replication where application_name = 'standby' and sync_state = 'sync'`;
      if (rows.length > 0) break;
      if (i > 300) throw new Error('the standby did not become synchronous within 30 s');
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    await admin.end();
  }
  const stopOne = (data: string) => {
    if (!existsSync(join(data, 'postmaster.pid'))) return;
    spawnSync(user ? 'runuser' : join(bin, 'pg_ctl'), [
      ...(user ? ['-u', 'postgres', '--', join(bin, 'pg_ctl')] : []),
      '-D',
      data,
      '-m',
      'immediate',
      '-w',
      'stop',
    ]);
  };
  return {
    primaryPort,
    standbyPort,
    adminUrl,
    killPrimary() {
      const pid = Number(readFileSync(join(primary, 'postmaster.pid'), 'utf8').split('\n')[0]);
      process.kill(pid, 'SIGKILL');
    },
    promote() {
      run('pg_ctl', ['-D', standby, '-w', '-t', '30', 'promote']);
    },
    stop() {
      stopOne(standby);
      stopOne(primary);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
