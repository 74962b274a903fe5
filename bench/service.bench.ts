// Service costs: API key authentication (warm cache vs one argon2 verification) and init throughput.
// Run: npx vitest bench --run --project shared bench/service.bench.ts
import pino from 'pino';
import { bench, describe } from 'vitest';
import { generateApiKey, hashApiKey, verifyApiKeyHash } from '../src/core/apiKeys.js';
import { createApiKeyRepository } from '../src/db/apiKeys.js';
import { backends } from '../test/support/databases.js';
import { runMigrations } from '../src/db/migrate.js';
import { createSessionRepository } from '../src/db/sessions.js';
import { createApiKeyAuthenticator } from '../src/server/apiKeyAuthenticator.js';
import { createApp } from '../src/server/app.js';
import { createMetrics } from '../src/server/metrics.js';

const { id, key } = generateApiKey('attest');
const hash = await hashApiKey(key);
// the run's embedded server (test/support/embeddedServer.ts), a migrated database of its own
const handle = await backends()[0]!.open();
await createApiKeyRepository(handle.db).insert({ id, name: 'bench', hash, expiresInSeconds: null });

const auth = createApiKeyAuthenticator({ lookup: createApiKeyRepository(handle.db) });
await auth.authenticate(key); // warm the cache

const app = createApp({
  logger: pino({ level: 'silent' }),
  auth,
  sessions: createSessionRepository(handle.db),
  verify: async () => {
    throw new Error('not used');
  },
  metrics: createMetrics(),
  ready: async () => true,
  sessionTtlSeconds: 300,
});

describe('API key authentication', () => {
  bench('warm cache (HMAC lookup, no argon2)', async () => {
    const r = await auth.authenticate(key);
    if (!r.ok) throw new Error('auth failed');
  });
  bench(
    'one argon2id verification (cold key)',
    async () => {
      if (!(await verifyApiKeyHash(hash, key))) throw new Error('mismatch');
    },
    { iterations: 20 },
  );
});

describe('init on the embedded PostgreSQL', () => {
  bench('POST /api/v1/attestation/init', async () => {
    const res = await app.request('/api/v1/attestation/init', {
      method: 'POST',
      headers: { 'X-Api-Key': key },
    });
    if (res.status !== 200) throw new Error(`status ${res.status}`);
  });
});
