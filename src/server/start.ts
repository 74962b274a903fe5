import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { serve } from '@hono/node-server';
import type { Logger } from 'pino';
import { ConfigError, type Config } from '../config.js';
import { verifyToken } from '../core/verify.js';
import { buildVerifiers, loadAppleRoots } from '../core/verifiers.js';
import { createAllowlistRepository, createCachedAllowlist } from '../db/allowlist.js';
import { createApiKeyRepository } from '../db/apiKeys.js';
import { createAppleKeyRepository } from '../db/appleKeys.js';
import { openDatabase, type DatabaseHandle } from '../db/client.js';
import { migrationStatus, runMigrations } from '../db/migrate.js';
import { createPoolWatchdog } from '../db/poolWatchdog.js';
import { createSessionRepository } from '../db/sessions.js';
import { createApiKeyAuthenticator } from './apiKeyAuthenticator.js';
import { createPlayIntegrityClient } from '../google/playIntegrityClient.js';
import { createApp, describeFault } from './app.js';
import { createMetrics } from './metrics.js';

export interface RunningServer {
  url: string;
  port: number;
  database: DatabaseHandle;
  close(): Promise<void>;
}

/** Revocation, expiry and allowlist edits reach every instance within this time. */
export const PROPAGATION_MS = 5000;

/**
 * Opens the database, migrates (unless told not to), wires the app and listens.
 * Used by `attest serve` and by the tests that need a real socket.
 */
export async function startServer(config: Config, logger: Logger, options: { migrate: boolean }): Promise<RunningServer> {
  let appleRoots;
  try {
    appleRoots = loadAppleRoots(config.appleRootCaPath ? readFileSync(config.appleRootCaPath, 'utf8') : undefined);
  } catch (err) {
    throw new ConfigError(`ATTEST_APPLE_ROOT_CA (${config.appleRootCaPath}): ${(err as Error).message}`);
  }
  if (config.appleRootCaPath) {
    logger.warn({ path: config.appleRootCaPath, roots: appleRoots.length }, 'ATTEST_APPLE_ROOT_CA is set: App Attest trusts these roots instead of the built-in Apple root');
  }

  const database = await openDatabase({ url: config.databaseUrl, dataDir: config.dataDir, role: 'server' });
  try {
    if (options.migrate) {
      const { applied } = await runMigrations(database);
      if (applied > 0) logger.info({ applied }, 'migrations applied');
    }
    const pending = (await migrationStatus(database.db)).filter((m) => !m.applied);
    if (pending.length > 0) {
      throw new Error(`the database lacks ${pending.length} migration(s): run "attest db migrate" or start without --no-migrate`);
    }
  } catch (err) {
    await database.close();
    throw err;
  }

  const sessions = createSessionRepository(database.db);
  const apiKeys = createApiKeyRepository(database.db);
  const allowlist = createCachedAllowlist(createAllowlistRepository(database.db), { ttlMs: PROPAGATION_MS });
  const metrics = createMetrics({ sessionCounts: () => sessions.counts() });
  const googleDecoder = createPlayIntegrityClient({
    oauthUrl: config.googleOauthUrl,
    playIntegrityUrl: config.googlePlayIntegrityUrl,
    timeoutMs: config.googleTimeoutMs,
    maxInFlight: config.googleMaxInFlight,
    onEvent: (e) => metrics.observeGoogle(e.endpoint, e.outcome),
  });
  const verifiers = buildVerifiers({ allowlist, appleKeys: createAppleKeyRepository(database.db), appleRoots, googleDecoder });
  const auth = createApiKeyAuthenticator({
    lookup: apiKeys,
    revalidateMs: PROPAGATION_MS,
    onTouchError: (err) => logger.warn({ err: describeFault(err) }, 'could not record API key use'),
  });
  const app = createApp({
    logger,
    auth,
    sessions,
    verify: (input) => verifyToken(input, { now: () => new Date(), verifiers }),
    metrics,
    ready: async () => (await migrationStatus(database.db)).every((m) => m.applied),
    sessionTtlSeconds: config.sessionTtlSeconds,
    // Google's own bound must run out first, or a slow Google would pass for a hanging database
    requestDeadlineMs: Math.max(5000, config.googleTimeoutMs + 2000),
    onBackendTimeout: createPoolWatchdog(database, {
      onRecycle: () => logger.warn('the database answers on a new connection while the pool hangs: replacing the pool'),
    }),
  });

  // slow clients must not hold sockets: whole request within 10 s, headers within 5 s. Node checks
  // those limits only every connectionsCheckingInterval (30 s by default): check every second.
  const serverOptions = { requestTimeout: 10_000, headersTimeout: 5_000, keepAliveTimeout: 5_000, connectionsCheckingInterval: 1_000 };
  const server = await new Promise<Server>((resolve, reject) => {
    const s = serve({ fetch: app.fetch, port: config.port, hostname: config.host, serverOptions }, () => resolve(s as Server));
    (s as Server).once('error', reject);
  });
  server.maxHeadersCount = 100;
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const shownHost = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
  const url = `http://${shownHost.includes(':') ? `[${shownHost}]` : shownHost}:${port}`;
  logger.info({ url, database: database.kind, where: database.where }, 'listening');

  return {
    url,
    port,
    database,
    async close() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      });
      await database.close();
    },
  };
}
