import { ConfigError, loadConfig, type Config } from '../config.js';
import { DataDirUnsafeError, DatabaseBusyError, DatabaseMissingError, openDatabase, type DatabaseHandle } from '../db/client.js';
import { DatabaseUnavailableError, isConnectionError, unavailable } from '../db/errors.js';
import { migrationStatus } from '../db/migrate.js';
import { runtimeError, usageError } from './errors.js';

/** The configuration, with a bad value reported as a usage error. */
export function config(flags: Partial<Config> = {}): Config {
  try {
    return loadConfig(flags);
  } catch (err) {
    if (err instanceof ConfigError) throw usageError(`${err.message}; fix it and run again`);
    throw err;
  }
}

/**
 * Runs `work` with the configured database: PostgreSQL, the embedded one, or the embedded one
 * of a running `attest serve` through its socket. Closes it whatever happens. Only `create`
 * callers (db migrate) may create an embedded database that is not there yet.
 */
export async function withDatabase<T>(
  work: (db: DatabaseHandle) => Promise<T>,
  options: { requireMigrated?: boolean; create?: boolean; onProgress?: (message: string) => void } = {},
): Promise<T> {
  const cfg = config();
  let handle: DatabaseHandle;
  try {
    handle = await openDatabase({
      url: cfg.databaseUrl,
      dataDir: cfg.dataDir,
      role: 'cli',
      poolSize: 2,
      connectTimeoutSeconds: cfg.dbConnectTimeoutSeconds,
      create: options.create ?? false,
      ...(options.onProgress ? { onProgress: options.onProgress } : {}),
    });
  } catch (err) {
    if (err instanceof DatabaseBusyError || err instanceof DataDirUnsafeError || err instanceof DatabaseMissingError) throw runtimeError(err.message);
    throw runtimeError(`cannot open the database: ${(err as Error).message}`);
  }
  const fail = (err: unknown) =>
    runtimeError(unavailable(handle.where, err, { connectTimeoutSeconds: handle.connectTimeoutSeconds, embedded: handle.kind !== 'postgres' }).message);
  try {
    // a first statement before the work: an unreachable database is reported the same for every command
    let pending: number;
    try {
      pending = (await migrationStatus(handle.db)).filter((m) => !m.applied).length;
    } catch (err) {
      throw fail(err);
    }
    if (options.requireMigrated !== false && pending > 0) {
      throw runtimeError(`the database at ${handle.where} lacks ${pending} migration(s): run "attest db migrate" first`);
    }
    try {
      return await work(handle);
    } catch (err) {
      if (err instanceof DatabaseUnavailableError) throw runtimeError(err.message);
      if (isConnectionError(err)) throw fail(err);
      throw err;
    }
  } finally {
    await handle.close().catch(() => {});
  }
}
