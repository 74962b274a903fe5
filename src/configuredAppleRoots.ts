import type { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
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
    pem = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(
      `ATTEST_APPLE_ROOT_CA (${path}): cannot read the file (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
    );
  }
  try {
    return loadAppleRoots(pem);
  } catch (err) {
    throw new ConfigError(`ATTEST_APPLE_ROOT_CA (${path}): ${(err as Error).message}`);
  }
}
