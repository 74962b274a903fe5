import type { GoogleServiceAccount } from '../../../core/ports.js';
import { parseServiceAccount } from '../../../upstream/googleServiceAccount.js';
import { usageError } from '../../errors.js';
import { CLI_INPUT_MAX_BYTES, readCliFileSync } from '../../inputFiles.js';

/** The Google service-account key file of `--service-account-file`, read and checked. */
export async function readServiceAccountFile(path: string): Promise<GoogleServiceAccount> {
  const text = readCliFileSync(path, {
    maxBytes: CLI_INPUT_MAX_BYTES,
    what: '--service-account-file',
  }).toString('utf8');
  const parsed = await parseServiceAccount(text);
  if (!parsed.ok) throw usageError(`--service-account-file ${path}: ${parsed.problem}`);
  return parsed.account;
}
