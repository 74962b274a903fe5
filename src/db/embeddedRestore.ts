import { Fault } from '../core/fault.js';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Readable } from 'node:stream';
import {
  BackupRefusedError,
  DEFAULT_LIMITS,
  unpackBackup,
  type UnpackLimits,
} from './backupArchive.js';
import { acquireLock, LOCK_FILE, readLiveLock } from './dataDirLock.js';
import {
  PASSWORD_FILE,
  PG_DIR,
  PGLITE_DIR,
  startServer,
  type EmbeddedServer,
} from './embeddedServer.js';
import { chownTree, runAsUser } from './embeddedUser.js';
import { postgresTarget } from './postgresUrl.js';
import { assertPrivate } from './runningServer.js';
import { writePrivateFile } from '../writePrivateFile.js';

/** The data dir is held by a live process, or holds a database already. */
export class RestoreBusyError extends Fault {
  override readonly name = 'RestoreBusyError';
  constructor(message: string) {
    super('restore_busy', message, { exit: 3 });
  }
}

// PostgreSQL's major version this attest runs: a cluster of another is not readable by it
const PG_MAJOR = '18';

/**
 * Creates the embedded database in `dataDir` from a backup made by `attest db backup` (a gzipped
 * tar of a base backup), read from `backup` as it streams. `dataDir` must hold no database. The
 * tar is unpacked beside the cluster's folder first (bounded in bytes and in entries, checked
 * entry by entry: see backupArchive), started (PostgreSQL replays the backup's WAL), checked to
 * be attest's database (attest's migrations table with a shipped migration in it, and the first
 * migration's tables), given a new password, stopped, and only then renamed into place: a refused
 * or failed restore leaves nothing that looks like a database. Refusals are BackupRefusedError.
 */
export async function restoreEmbedded(
  dataDir: string,
  backup: Readable,
  limits: UnpackLimits = DEFAULT_LIMITS,
): Promise<void> {
  const dir = resolve(dataDir);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  assertPrivate(dir);
  const lockPath = join(dir, LOCK_FILE);
  const holder = readLiveLock(lockPath);
  if (holder)
    throw new RestoreBusyError(
      `the embedded database in ${dir} is in use by process ${holder.pid}: stop it first`,
    );
  acquireLock(lockPath, (message) => new RestoreBusyError(message));
  const partial = join(dir, `${PG_DIR}.restoring-${process.pid}`);
  let server: EmbeddedServer | undefined;
  try {
    if (existsSync(join(dir, PG_DIR)) || existsSync(join(dir, PGLITE_DIR)))
      throw new RestoreBusyError(`${dir} already holds a database`);
    rmSync(partial, { recursive: true, force: true });
    await unpackBackup(backup, partial, limits);
    const version = readFileSync(join(partial, 'PG_VERSION'), 'utf8').trim();
    if (version !== PG_MAJOR)
      throw new BackupRefusedError(
        version === '17' && !existsSync(join(partial, 'backup_label'))
          ? "it is a backup of attest's earlier embedded engine (PGlite, PostgreSQL 17), which this version cannot read"
          : `it holds a PostgreSQL ${version.slice(0, 10)} data directory, not ${PG_MAJOR}`,
      );
    if (!existsSync(join(partial, 'backup_label')))
      throw new BackupRefusedError(
        'it holds no backup_label (it was not made by "attest db backup")',
      );
    for (const empty of [
      'pg_wal',
      'pg_replslot',
      'pg_notify',
      'pg_serial',
      'pg_snapshots',
      'pg_stat_tmp',
      'pg_subtrans',
      'pg_dynshmem',
      'pg_tblspc',
      'pg_twophase',
      'pg_commit_ts',
      'pg_logical',
      'pg_logical/snapshots',
      'pg_logical/mappings',
    ])
      mkdirSync(join(partial, empty), { recursive: true, mode: 0o700 });
    const user = runAsUser(dir);
    if (user) chownTree(partial, user);
    try {
      server = await startServer(dir, { restoring: partial });
    } catch (err) {
      throw new BackupRefusedError(
        `its data directory does not start (${(err instanceof Error ? err.message : String(err)).split('\n')[0]!.slice(0, 200)})`,
      );
    }
    const password = randomBytes(24).toString('base64url');
    await checkAndReseal(server.url, password);
    await server.stop();
    server = undefined;
    writePrivateFile(join(dir, PASSWORD_FILE), `${password}\n`);
    renameSync(partial, join(dir, PG_DIR));
  } catch (err) {
    await server?.stop().catch(() => {});
    rmSync(partial, { recursive: true, force: true });
    throw err;
  } finally {
    rmSync(lockPath, { force: true });
  }
}

/** Refuses a database that is not attest's; gives its role this data dir's new password. */
async function checkAndReseal(url: string, password: string): Promise<void> {
  const { default: postgres } = await import('postgres');
  const target = postgresTarget(url);
  const sql = postgres(target.url, {
    ...target.options,
    max: 1,
    onnotice: () => {},
    fetch_types: false,
  });
  try {
    const [row] = await sql<{ migrations: boolean; tables: boolean }[]>`
      select to_regclass('drizzle.__drizzle_migrations') is not null as migrations,
             to_regclass('public.api_keys') is not null and to_regclass('public.attestation_sessions') is not null as tables`;
    if (!row?.migrations)
      throw new BackupRefusedError(
        "it holds a PostgreSQL database, but not attest's (no attest migration was applied to it)",
      );
    const [applied] = await sql<
      { n: number }[]
    >`select count(*)::int as n from drizzle.__drizzle_migrations`;
    if (!applied?.n)
      throw new BackupRefusedError(
        "it holds a PostgreSQL database, but not attest's (no attest migration was applied to it)",
      );
    if (!row.tables)
      throw new BackupRefusedError("it holds a PostgreSQL database, but not attest's tables");
    await sql.unsafe(`alter role postgres password '${password}'`);
  } finally {
    await sql.end({ timeout: 5 });
  }
}
