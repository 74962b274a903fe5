import type { Logger } from 'pino';
import type { AllowlistRepository } from '../db/allowlist.js';
import { MasterKeyError } from '../db/secrets.js';

/**
 * Another instance rotated the master key: this one's reloads cannot open the Play Integrity keys
 * any more. Requests then fail (never a verdict from a stale allowlist); the log says why, once
 * per reload, until the instance is restarted with the new key.
 */
export function reportingKeyFailures(
  repo: AllowlistRepository,
  logger: Logger,
): AllowlistRepository {
  return {
    ...repo,
    async listAndroid() {
      try {
        return await repo.listAndroid();
      } catch (err) {
        if (err instanceof MasterKeyError)
          logger.error(
            { reason: err.message },
            'cannot load the allowlist: restart this instance with the current master key',
          );
        throw err;
      }
    },
  };
}
