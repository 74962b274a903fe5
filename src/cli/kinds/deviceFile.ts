import { chmodSync, renameSync, writeFileSync } from 'node:fs';
import { CliError, runtimeError, usageError } from '../errors.js';
import { CLI_INPUT_MAX_BYTES, readCliFileSync } from '../inputFiles.js';

/** The JSON of a simulated device file (`dev mint`), still to be checked by its kind. */
export function readDeviceJson<T>(path: string): Partial<T> {
  try {
    return JSON.parse(
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
}

/** Writes through a temporary file, so a crash never leaves half a device; always 0600. */
export function writeDevice(path: string, device: object, create: boolean): void {
  const text = `${JSON.stringify(device, null, 2)}\n`;
  try {
    if (create) {
      writeFileSync(path, text, { mode: 0o600, flag: 'wx' });
      return;
    }
    const tmp = `${path}.tmp-${process.pid}`;
    writeFileSync(tmp, text, { mode: 0o600 });
    renameSync(tmp, path);
    chmodSync(path, 0o600);
  } catch (err) {
    throw runtimeError(
      `cannot write the device file ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
    );
  }
}
