import { ConfigError, loadConfig, type Config } from '../config.js';
import { DatabaseBusyError, openDatabase, type DatabaseHandle } from '../db/client.js';
import { resolveMasterKey, type ResolvedMasterKey } from '../db/masterKey.js';
import { migrationStatus } from '../db/migrate.js';
import { createSecretBox, type SecretBox } from '../db/secretBox.js';
import { checkMasterKey, MasterKeyError } from '../db/secrets.js';
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

export interface Secrets {
  box: SecretBox;
  masterKey: ResolvedMasterKey;
}

/**
 * The master key for commands that read or write sealed secrets, checked against the database
 * (a wrong key is one line naming the expected key id). Creating the embedded default key is
 * said once on stderr. `check: false` leaves the check to the caller (the migration path).
 */
export async function loadSecrets(handle: DatabaseHandle, options: { check?: boolean; establish?: boolean } = {}): Promise<Secrets> {
  let masterKey: ResolvedMasterKey;
  try {
    masterKey = await resolveMasterKey(config(), handle);
  } catch (err) {
    throw secretsError(err);
  }
  if (masterKey.created) process.stderr.write(`attest: created a master key in ${masterKey.source}: back it up with the data dir (not inside the same backup)\n`);
  const box = createSecretBox([masterKey.key]);
  if (options.check !== false) {
    try {
      await checkMasterKey(handle.db, box, { source: masterKey.source, ...(options.establish === false ? { establish: false } : {}) });
    } catch (err) {
      throw secretsError(err);
    }
  }
  return { box, masterKey };
}

/** A master key problem is a usage error (fix the configuration); anything else passes through. */
export function secretsError(err: unknown): unknown {
  if (err instanceof MasterKeyError || err instanceof ConfigError) return usageError(`${err.message}`);
  return err;
}

/** withDatabase, with the master key loaded and checked for `work`. */
export function withSecrets<T>(work: (db: DatabaseHandle, secrets: Secrets) => Promise<T>, options: { establish?: boolean } = {}): Promise<T> {
  return withDatabase(async (handle) => work(handle, await loadSecrets(handle, options)));
}

function reason(err: unknown): string {
  const e = err as { code?: string; message?: string; cause?: { message?: string } };
  return e.cause?.message ?? e.code ?? e.message ?? String(err);
}
