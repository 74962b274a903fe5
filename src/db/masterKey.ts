import { constants, copyFileSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import { ConfigError, type Config } from '../config.js';
import { decodeBase64, encodeBase64 } from '../core/base64.js';
import type { DatabaseHandle } from './client.js';
import { MASTER_KEY_BYTES, toMasterKey, type MasterKey } from './secretBox.js';
import { MasterKeyError, sealedUnderKeyId } from './secrets.js';

/** The embedded database's own master key, beside its data when none is configured. */
export const DEFAULT_MASTER_KEY_FILE = 'master.key';

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
    );
  }
  return { key: toMasterKey(key), source: path, defaultFile: path, created: true };
}

/** A key file: 32 bytes in base64 (surrounding whitespace ignored). `what` names it in errors. */
export function readMasterKeyFile(path: string, what: string): MasterKey {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(
      `${what}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
    );
  }
  return toMasterKey(parseKey(text, `${what} (${path})`));
}

/**
 * Replaces the embedded default key file after a rotation: the old key moves aside (the operator
 * deletes it once no backup needs it) and the new one takes its place.
 */
export function replaceDefaultKeyFile(path: string, oldKey: MasterKey, newKey: MasterKey): string {
  const aside = `${path}.${oldKey.id}.old`;
  const temporary = `${path}.${newKey.id}.new`;
  writeFileSync(temporary, `${encodeBase64(newKey.key)}\n`, { mode: 0o600 });
  copyFileSync(path, aside, constants.COPYFILE_EXCL);
  // a rename: the default file holds one key or the other, never half of one
  renameSync(temporary, path);
  return aside;
}

function parseKey(text: string, what: string): Uint8Array {
  const bytes = decodeBase64(text.trim());
  if (!bytes || bytes.length !== MASTER_KEY_BYTES)
    throw new ConfigError(
      `${what} is not a master key: expected ${MASTER_KEY_BYTES} bytes in base64 (make one with: openssl rand -base64 32)`,
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
    );
  }
}
