import type { X509Certificate } from 'node:crypto';
import { InputFileError, readInputFileSync } from './inputFile.js';
import { ConfigError } from './config.js';
import { loadAppleRoots } from './core/verifiers.js';
import { parseTrustRoots } from './core/apple/trustRoots.js';
import { defaultReceiptRoots } from './core/apple/verifyReceipt.js';

/**
 * The App Attest roots this deployment trusts: the PEM file ATTEST_APPLE_ROOT_CA names, else Apple's
 * built-in root. A file that cannot be read or parsed is one ConfigError naming the variable and
 * the path, the same for `attest serve` and `attest verify-file`.
 * @param path the configured `appleRootCaPath`
 */
export function configuredAppleRoots(path: string | undefined): readonly X509Certificate[] {
  if (path === undefined) return loadAppleRoots();
  const pem = readRootsPem('ATTEST_APPLE_ROOT_CA', path);
  try {
    return loadAppleRoots(pem);
  } catch (err) {
    throw new ConfigError(`ATTEST_APPLE_ROOT_CA (${path}): ${(err as Error).message}`);
  }
}

/**
 * The roots App Attest receipts chain to: the PEM file ATTEST_APPLE_RECEIPT_ROOT_CA names, else
 * the built-in Apple Root CA - G3.
 * @param path the configured `appleReceiptRootCaPath`
 */
export function configuredReceiptRoots(path: string | undefined): readonly X509Certificate[] {
  if (path === undefined) return defaultReceiptRoots();
  const pem = readRootsPem('ATTEST_APPLE_RECEIPT_ROOT_CA', path);
  try {
    return parseTrustRoots(pem);
  } catch (err) {
    throw new ConfigError(`ATTEST_APPLE_RECEIPT_ROOT_CA (${path}): ${(err as Error).message}`);
  }
}

/** The PEM text of a configured roots file, bounded (a bundle is a few KiB; the path may name a device or a pipe). */
function readRootsPem(variable: string, path: string): string {
  try {
    return readInputFileSync(path, { maxBytes: 1024 * 1024, what: 'the file' }).toString('utf8');
  } catch (err) {
    if (err instanceof InputFileError)
      throw new ConfigError(
        `${variable} (${path}): ${err.message.replace(`the file: cannot read ${path}`, 'cannot read the file').replace('the file: ', '')}`,
      );
    throw err;
  }
}
