import {
  closeSync,
  fsyncSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import { ConfigError, type Config } from '../config.js';
import { InputFileError, readInputFileSync } from '../inputFile.js';
import { decodeBase64, encodeBase64 } from '../core/base64.js';
import type { Database, DatabaseHandle } from './database.js';
import { MASTER_KEY_BYTES, toMasterKey, type MasterKey } from './secretBox.js';
import { MasterKeyError, sealedUnderKeyId } from './secrets.js';

/** The embedded database's own master key, beside its data when none is configured. */
export const DEFAULT_MASTER_KEY_FILE = 'master.key';

// a master key file's problem names the file and what to do with it: the CLI prints it as it is
const MASTER_KEY_PROBLEM = { fixIt: false };

export interface ResolvedMasterKey {
  key: MasterKey;
  /** where it came from, for messages: a path or ATTEST_MASTER_KEY */
  source: string;
  /** the embedded default file, when that is where the key came from */
  defaultFile?: string;
  /** the default file was created just now (tell the operator to back it up) */
  created: boolean;
}

type KeyConfig = Pick<Config, 'masterKey' | 'masterKeyFile' | 'dataDir'>;

/**
 * The master key: ATTEST_MASTER_KEY, else ATTEST_MASTER_KEY_FILE, else (embedded database only)
 * `<dataDir>/master.key`, created with mode 0600 on first use. PostgreSQL without a key is refused:
 * its dumps and replicas leave the host, so the key must be kept apart deliberately.
 */
export async function resolveMasterKey(
  config: KeyConfig,
  handle: Pick<DatabaseHandle, 'db' | 'kind'>,
): Promise<ResolvedMasterKey> {
  if (config.masterKey !== undefined)
    return {
      key: toMasterKey(parseKey(config.masterKey, 'ATTEST_MASTER_KEY')),
      source: 'ATTEST_MASTER_KEY',
      created: false,
    };
  if (config.masterKeyFile !== undefined)
    return {
      key: readMasterKeyFile(config.masterKeyFile, 'ATTEST_MASTER_KEY_FILE'),
      source: config.masterKeyFile,
      created: false,
    };
  if (handle.kind === 'postgres') {
    throw new MasterKeyError(
      'no master key: on PostgreSQL set ATTEST_MASTER_KEY_FILE to a file holding 32 random bytes in base64 (openssl rand -base64 32 > master.key), kept apart from the database backups',
    );
  }
  const path = join(resolve(config.dataDir), DEFAULT_MASTER_KEY_FILE);
  // a rotation that a crash stopped half-way is completed (or undone) before the key is read
  if (handle.kind === 'embedded') await recoverKeyRotation(path, handle.db);
  const existing = readIfPresent(path);
  if (existing !== null)
    return {
      key: toMasterKey(parseKey(existing, path)),
      source: path,
      defaultFile: path,
      created: false,
    };
  const expected = await sealedUnderKeyId(handle.db);
  if (expected) {
    throw new MasterKeyError(
      `the database's secrets are sealed with master key ${expected}, but ${path} is missing: restore it from a backup, or set ATTEST_MASTER_KEY_FILE`,
    );
  }
  const key = randomBytes(MASTER_KEY_BYTES);
  try {
    writeFileSync(path, `${encodeBase64(key)}\n`, { flag: 'wx', mode: 0o600 });
  } catch (err) {
    // another attest command created it a moment ago: use that one
    if ((err as NodeJS.ErrnoException).code === 'EEXIST')
      return {
        key: toMasterKey(parseKey(readFileSync(path, 'utf8'), path)),
        source: path,
        defaultFile: path,
        created: false,
      };
    throw new ConfigError(
      `cannot create the master key ${path} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
      MASTER_KEY_PROBLEM,
    );
  }
  return { key: toMasterKey(key), source: path, defaultFile: path, created: true };
}

/** A key file: 32 bytes in base64 (surrounding whitespace ignored). `what` names it in errors. */
export function readMasterKeyFile(path: string, what: string): MasterKey {
  let text: string;
  try {
    // a key file is 45 bytes; the path may name a device or a pipe
    text = readInputFileSync(path, { maxBytes: 1024, what }).toString('utf8');
  } catch (err) {
    if (err instanceof InputFileError) throw new ConfigError(err.message, MASTER_KEY_PROBLEM);
    throw err;
  }
  return toMasterKey(parseKey(text, `${what} (${path})`));
}

/** The points of a default key file rotation, in order (crash tests stop the process at each). */
export type RotationStep = 'pending-written' | 'old-set-aside' | 'committed' | 'renamed';

/**
 * Rotates the embedded database's own key file around `commit` (the database's re-encryption),
 * so that a crash at any point leaves a key file that opens the database, or a state
 * `recoverKeyRotation` completes at the next start:
 * 1. the new key is written (and synced) to `<path>.rotating.<new id>.<unique>`;
 * 2. the old key is copied to `<path>.<old id>.<unique>.old` (kept for the operator to delete once
 *    no backup needs it);
 * 3. `commit` runs: the database is now sealed under the new key;
 * 4. the pending file is renamed over `<path>` (atomic: the file holds one key or the other).
 * Names carry a unique part, so no rotation ever trips over files an earlier one left behind.
 * `after` is told each step once it is done (tests crash the process there).
 */
export async function rotateDefaultKeyFile<T>(options: {
  path: string;
  oldKey: MasterKey;
  newKey: MasterKey;
  db: Database;
  commit: () => Promise<T>;
  after?: (step: RotationStep) => void | Promise<void>;
}): Promise<{ result: T; aside: string }> {
  const { path, oldKey, newKey } = options;
  const after = options.after ?? (() => {});
  const pending = `${path}${PENDING}${newKey.id}.${unique()}`;
  writeKeyFile(pending, newKey.key);
  syncDirectory(dirname(path));
  await after('pending-written');
  const aside = `${path}.${oldKey.id}.${unique()}.old`;
  writeKeyFile(aside, oldKey.key);
  syncDirectory(dirname(path));
  await after('old-set-aside');
  let result: T;
  try {
    result = await options.commit();
  } catch (err) {
    // the database says whether the change committed: finish or undo the files accordingly
    await recoverKeyRotation(path, options.db);
    rmSync(aside, { force: true });
    throw err;
  }
  await after('committed');
  renameSync(pending, path);
  syncDirectory(dirname(path));
  await after('renamed');
  return { result, aside };
}

/**
 * Completes or undoes a rotation of the default key file that stopped half-way: a pending new key
 * the database is sealed under replaces `path`; pending keys it is not sealed under (the commit
 * never happened, or the file was cut short) are removed. Runs where the embedded database is
 * open, so no rotation is running meanwhile (PGlite admits one process).
 * @returns the pending file that became the key file, or null
 */
export async function recoverKeyRotation(path: string, db: Database): Promise<string | null> {
  const dir = dirname(path);
  const prefix = `${basename(path)}${PENDING}`;
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => n.startsWith(prefix));
  } catch {
    return null;
  }
  if (names.length === 0) return null;
  const sealedUnder = await sealedUnderKeyId(db);
  let finished: string | null = null;
  for (const name of names.sort()) {
    const file = join(dir, name);
    let id: string | null = null;
    try {
      id = toMasterKey(parseKey(readFileSync(file, 'utf8'), file)).id;
    } catch {
      // cut short by a crash while it was written: the commit never came
    }
    if (finished === null && id !== null && id === sealedUnder) {
      renameSync(file, path);
      finished = file;
    } else rmSync(file, { force: true });
  }
  syncDirectory(dir);
  return finished;
}

const PENDING = '.rotating.';
const unique = () => `${Date.now().toString(36)}-${randomBytes(6).toString('hex')}`;

/** Writes a key file that did not exist (mode 0600) and syncs it to disk. */
function writeKeyFile(path: string, key: Uint8Array): void {
  const fd = openSync(path, 'wx', 0o600);
  try {
    writeSync(fd, `${encodeBase64(key)}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Makes the directory's entries (a new or renamed file) durable. */
function syncDirectory(dir: string): void {
  let fd: number | undefined;
  try {
    fd = openSync(dir, 'r');
    fsyncSync(fd);
  } catch {
    // not every platform syncs a directory (Windows): the rename itself is still atomic
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

function parseKey(text: string, what: string): Uint8Array {
  const bytes = decodeBase64(text.trim());
  if (!bytes || bytes.length !== MASTER_KEY_BYTES)
    throw new ConfigError(
      `${what} is not a master key: expected ${MASTER_KEY_BYTES} bytes in base64 (make one with: openssl rand -base64 32)`,
      MASTER_KEY_PROBLEM,
    );
  return bytes;
}

function readIfPresent(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new ConfigError(
      `cannot read the master key ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
      MASTER_KEY_PROBLEM,
    );
  }
}
