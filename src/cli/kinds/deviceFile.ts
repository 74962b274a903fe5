import type { KeyObject } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { encodeBase64 } from '../../core/base64.js';
import { writePrivateFile } from '../../writePrivateFile.js';
import { CliError, runtimeError, usageError } from '../errors.js';
import { CLI_INPUT_MAX_BYTES, readCliFileSync } from '../inputFiles.js';

/** What every simulated device file (`dev mint`) holds besides its kind's own fields. */
export interface DeviceFileBase {
  kind: string;
  version: 1;
  /** base64 of the key id */
  keyId: string;
  /** PKCS#8 PEM of the device key */
  privateKey: string;
}

/** The key fields of a new device file. */
export function deviceKeyFields(key: { keyId: Uint8Array; privateKey: KeyObject }): {
  keyId: string;
  privateKey: string;
} {
  return {
    keyId: encodeBase64(key.keyId),
    privateKey: key.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  };
}

/**
 * Reads a simulated device file of `kind`, its own fields checked by `valid`.
 * @param service - the `dev mint` subcommand that makes such files, for the message
 */
export function readDeviceFile<T extends DeviceFileBase>(
  path: string,
  kind: T['kind'],
  service: string,
  valid: (parsed: Partial<T>) => boolean,
): T {
  let parsed: Partial<T>;
  try {
    parsed = JSON.parse(
      readCliFileSync(path, {
        maxBytes: CLI_INPUT_MAX_BYTES,
        what: 'the device file',
      }).toString('utf8'),
    ) as Partial<T>;
  } catch (err) {
    if (err instanceof CliError) throw err;
    throw usageError(
      `cannot read the device file ${path} (${(err as NodeJS.ErrnoException).code ?? 'not JSON'}); give a new path to create a device`,
    );
  }
  const ok =
    parsed?.kind === kind &&
    parsed.version === 1 &&
    typeof parsed.privateKey === 'string' &&
    typeof parsed.keyId === 'string' &&
    valid(parsed);
  if (!ok)
    throw usageError(`${path} is not a simulated device file made by "attest dev mint ${service}"`);
  return parsed as T;
}

/** Creates the file (O_EXCL), or replaces it through a temporary file of a random name (O_EXCL, see writePrivateFile): a crash never leaves half a device, a planted symlink is never followed; always 0600. */
export function writeDevice(path: string, device: object, create: boolean): void {
  const text = `${JSON.stringify(device, null, 2)}\n`;
  try {
    if (create) {
      writeFileSync(path, text, { mode: 0o600, flag: 'wx' });
      return;
    }
    writePrivateFile(path, text);
  } catch (err) {
    throw runtimeError(
      `cannot write the device file ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
    );
  }
}
