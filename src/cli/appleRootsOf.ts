import type { X509Certificate } from 'node:crypto';
import { configuredAppleRoots } from '../configuredAppleRoots.js';
import type { Config } from '../config.js';
import { configProblem } from './context.js';

/** The configured App Attest roots, with an unreadable or unparsable file reported as a usage error. */
export function appleRootsOf(cfg: Config): readonly X509Certificate[] {
  try {
    return configuredAppleRoots(cfg.appleRootCaPath);
  } catch (err) {
    throw configProblem(err);
  }
}
