import type { X509Certificate } from 'node:crypto';
import { InputFileError, readInputFileSync } from './inputFile.js';
import { ConfigError } from './config.js';
import { loadAppleRoots } from './core/verifiers.js';

/**
 * The App Attest roots this deployment trusts: the PEM file ATTEST_APPLE_ROOT_CA names, else Apple's
 * built-in root. A file that cannot be read or parsed is one ConfigError naming the variable and
 * the path, the same for `attest serve` and `attest verify-file`.
 * @param path the configured `appleRootCaPath`
 */
export function configuredAppleRoots(path: string | undefined): readonly X509Certificate[] {
  if (path === undefined) return loadAppleRoots();
  let pem: string;
  try {
    // a PEM bundle of roots is a few KiB; the path may name a device or a pipe
    pem = readInputFileSync(path, { maxBytes: 1024 * 1024, what: 'the file' }).toString('utf8');
  } catch (err) {
    if (err instanceof InputFileError)
      throw new ConfigError(
        `ATTEST_APPLE_ROOT_CA (${path}): ${err.message.replace(`the file: cannot read ${path}`, 'cannot read the file').replace('the file: ', '')}`,
      );
    throw err;
  }
  try {
    return loadAppleRoots(pem);
  } catch (err) {
    throw new ConfigError(`ATTEST_APPLE_ROOT_CA (${path}): ${(err as Error).message}`);
  }
}
