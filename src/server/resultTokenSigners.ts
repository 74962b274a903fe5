import type { Logger } from 'pino';
import { ConfigError, DEFAULT_RESULT_TOKEN_TTL_SECONDS, type Config } from '../config.js';
import type { createApiKeyRepository } from '../db/apiKeys.js';
import type { DatabaseHandle } from '../db/database.js';
import { createResultKeyRepository } from '../db/resultKeys.js';
import type { createSecretBox } from '../db/secretBox.js';
import { PROPAGATION_MS } from './propagation.js';
import { createResultTokenSigner, type ResultTokenSigner } from './resultTokenSigner.js';
import type { StartOptions } from './start.js';

/**
 * The result token signers when there is an issuer (ATTEST_ISSUER, or the server's own loopback
 * URL with `ownIssuer`): the live one, and with ATTEST_TEST_KEYS on a test one whose keys sign
 * only test-mode keys' tokens. Their first keys are made now, so each JWKS has a key before any
 * token. Without an issuer no token can be made: the service refuses to start while any live API
 * key has result tokens on, rather than answer those keys' verifies without the token they rely on.
 */
export async function resultTokenSigners(
  database: DatabaseHandle,
  box: ReturnType<typeof createSecretBox>,
  config: Config,
  logger: Logger,
  apiKeys: ReturnType<typeof createApiKeyRepository>,
  options: StartOptions,
): Promise<{ live: ResultTokenSigner; test?: ResultTokenSigner } | undefined> {
  const issuer = options.ownIssuer ?? config.issuer;
  if (issuer === undefined) {
    if (await apiKeys.anyResultTokens())
      throw new ConfigError(
        'API keys with result tokens on need ATTEST_ISSUER (an https URL, such as https://attest.example.com); set it, or turn them off with "attest keys update ID --result-tokens off"',
      );
    return undefined;
  }
  const keys = createResultKeyRepository(database.db, box);
  const make = (mode: 'live' | 'test') =>
    createResultTokenSigner({
      keys,
      issuer,
      mode,
      ttlSeconds: config.resultTokenTtlSeconds ?? DEFAULT_RESULT_TOKEN_TTL_SECONDS,
      refreshMs: PROPAGATION_MS,
      auditor: {
        actor: 'attest serve',
        log: (event) =>
          logger.info(
            { audit: { ...event, at: event.at.toISOString() } },
            `${event.action} ${event.target} by ${event.actor}`,
          ),
      },
    });
  const live = make('live');
  await live.ensureKey();
  if (!config.testKeys) return { live };
  const test = make('test');
  await test.ensureKey();
  return { live, test };
}
