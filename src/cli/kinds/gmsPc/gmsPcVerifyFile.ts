import { parseEnvelope } from '../../../core/envelope.js';
import { usageError } from '../../errors.js';
import type { VerifyFileFlags, VerifyFileKind } from '../verifyFileKind.js';

/**
 * Play Integrity for PC in `attest verify-file`: only Google decodes a PC token, so it takes the
 * Play Integrity kind's `--online` (and `--package --service-account-file` without a database);
 * the decoder is the one that kind configures.
 */
export const gmsPcVerifyFile: VerifyFileKind = {
  options: [],
  attestationOnly: [],
  testTrustReasons: [],
  offline: () => false,
  checkToken(token, opts: VerifyFileFlags) {
    if (!opts.online && tokenService(token) === 'gms-pc')
      throw usageError(
        'this is a Play Integrity for PC token: only Google can decode it; re-run with --online (calls Google with the package service account)',
      );
  },
  prepare: async () => ({ offline: () => () => ({}), database: async () => () => ({}) }),
};

function tokenService(token: Uint8Array): string | undefined {
  try {
    return parseEnvelope(token).service;
  } catch {
    return undefined;
  }
}
