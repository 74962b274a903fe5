import { readFileSync } from 'node:fs';
import { ConfigError } from './config.js';
import {
  defaultAndroidRoots,
  parseAndroidRoots,
  type AndroidRootKey,
} from './core/androidKey/trustRoots.js';

/**
 * The Android attestation root keys this deployment trusts: the keys of the certificates in the
 * PEM file ATTEST_ANDROID_ROOT_CA names (tests), else Google's. A file that cannot be read or
 * parsed is one ConfigError naming the variable and the path.
 * @param path the configured `androidRootCaPath`
 */
export function configuredAndroidRoots(path: string | undefined): readonly AndroidRootKey[] {
  if (path === undefined) return defaultAndroidRoots();
  let pem: string;
  try {
    pem = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(
      `ATTEST_ANDROID_ROOT_CA (${path}): cannot read the file (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
    );
  }
  try {
    return parseAndroidRoots(pem);
  } catch (err) {
    throw new ConfigError(`ATTEST_ANDROID_ROOT_CA (${path}): ${(err as Error).message}`);
  }
}
