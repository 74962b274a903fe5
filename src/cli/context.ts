import { ConfigError, loadConfig, type Config } from '../config.js';
import { DatabaseBusyError, openDatabase, type DatabaseHandle } from '../db/client.js';
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
 * of a running `attest serve` through its socket. Closes it whatever happens.
 */
export async function withDatabase<T>(work: (db: DatabaseHandle) => Promise<T>, options: { requireMigrated?: boolean } = {}): Promise<T> {
  const cfg = config();
  let handle: DatabaseHandle;
  try {
    handle = await openDatabase({ url: cfg.databaseUrl, dataDir: cfg.dataDir, role: 'cli', poolSize: 2 });
  } catch (err) {
    if (err instanceof DatabaseBusyError) throw runtimeError(err.message);
    throw runtimeError(`cannot open the database: ${(err as Error).message}`);
  }
  try {
    if (options.requireMigrated !== false) {
      let pending: number;
      try {
        pending = (await migrationStatus(handle.db)).filter((m) => !m.applied).length;
      } catch (err) {
        throw runtimeError(`cannot reach the database at ${handle.where}: ${reason(err)}; check DATABASE_URL and that the server runs`);
      }
      if (pending > 0) throw runtimeError(`the database at ${handle.where} lacks ${pending} migration(s): run "attest db migrate" first`);
    }
    return await work(handle);
  } finally {
    await handle.close().catch(() => {});
  }
}

function reason(err: unknown): string {
  const e = err as { code?: string; message?: string; cause?: { message?: string } };
  return e.cause?.message ?? e.code ?? e.message ?? String(err);
}
