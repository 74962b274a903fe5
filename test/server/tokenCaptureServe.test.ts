// ATTEST_CAPTURE as `serve` wires it (startServer), on the embedded database and PostgreSQL: a
// rejected verify through the HTTP listener is kept with its reason and the server's nonce, an
// accepted one is not (rejected), and the age pruner deletes captures past
// ATTEST_CAPTURE_RETENTION while a fresh one stays.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { loadConfig, type Config } from '../../src/config.js';
import { createCaptureRepository } from '../../src/db/captures.js';
import { startServer } from '../../src/server/start.js';
import { backends, useDatabase } from '../support/databases.js';
import { TEST_MASTER_KEY_ENV, TEST_SECRETS } from '../support/secrets.js';
import { captureLogger, issueKey } from '../support/service.js';

describe.each(backends())('serve with ATTEST_CAPTURE=rejected on $name', (backend) => {
  const db = useDatabase(backend);

  it('keeps the rejected verify with its reason and nonce; prunes captures past the retention', async () => {
    const config: Config = {
      ...loadConfig({}, { ATTEST_CAPTURE: 'rejected', ATTEST_CAPTURE_RETENTION: '1h' }),
      databaseUrl: db.url,
      dataDir: '',
      port: 0,
      host: '127.0.0.1',
      masterKey: TEST_MASTER_KEY_ENV,
      logLevel: 'warn',
    };
    const repo = createCaptureRepository(db.db);
    // kept two hours ago: past the retention
    await repo.record(
      {
        verifiedAt: new Date(Date.now() - 7200_000),
        mode: 'live',
        apiKeyId: 'k1k1k1k1k1k1k1k1',
        appScope: null,
        nonce: randomBytes(32),
        service: null,
        app: null,
        entry: null,
        valid: false,
        reason: 'token_malformed',
        detail: 'old',
        checks: [],
        token: randomBytes(64),
      },
      TEST_SECRETS,
      { count: 1000, bytes: 1024 ** 2 },
    );
    const server = await startServer(config, captureLogger('warn').logger, {
      migrate: true,
      pruneIntervalMs: 100,
    });
    try {
      const { key } = await issueKey(db, { name: 'rp' });
      const nonce = randomBytes(32);
      const res = await fetch(`${server.url}/api/v1/attestation/verify`, {
        method: 'POST',
        headers: { 'X-Api-Key': key, 'Content-Type': 'application/json' },
        body: JSON.stringify({
          attestationToken: randomBytes(40).toString('base64'),
          expectedNonce: nonce.toString('base64'),
        }),
      });
      const body = (await res.json()) as { isValid: boolean };
      expect(body.isValid).toBe(false);
      // the write follows the answer, and the pruner runs every 100 ms: both awaited as state
      await expect
        .poll(async () => (await repo.list({ mode: 'live', limit: 10 })).map((c) => c.detail), {
          timeout: 30_000,
        })
        .toEqual([expect.not.stringMatching(/^old$/)]);
      const [kept] = await repo.list({ mode: 'live', limit: 10 });
      expect(kept!.reason).toMatch(/^token_/);
      const read = await repo.read(kept!.id, TEST_SECRETS, { actor: 't', log: () => {} }, 'get');
      expect(Buffer.from(read!.nonce).equals(nonce)).toBe(true);
    } finally {
      await server.close();
    }
  }, 60_000);
});
