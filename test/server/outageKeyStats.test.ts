// The answers given while the database is away (503 with Retry-After) keep their API key when
// this process had verified it (the key cache knows it), so `attest stats --key` counts all of
// that key's errors, on the embedded database and PostgreSQL. A key the process never verified stays unknown: its id is the
// client's claim.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKeyRepository } from '../../src/db/apiKeys.js';
import { createVerificationStatsRepository } from '../../src/db/verificationStats.js';
import { createStatsRecorder } from '../../src/server/statsRecorder.js';
import { backends, useDatabase } from '../support/databases.js';
import { createTestService, issueKey, verify } from '../support/service.js';
import { b64, fakeVerify, token } from '../support/tokens.js';

describe.each(backends())('outage answers keep their key, on $name', (backend) => {
  const db = useDatabase(backend);
  let down = false;
  const away = () => {
    if (down)
      throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), {
        code: 'ECONNREFUSED',
      });
  };

  it('every outage answer (503) of a verified key is counted under it (attest stats --key), with its mode; an unverified key is not', async () => {
    const live = await issueKey(db, { name: 'live' });
    const test = await issueKey(db, { name: 'test', mode: 'test' });
    const other = await issueKey(db, { name: 'never used' });
    const repo = createApiKeyRepository(db.db);
    const recorder = createStatsRecorder({
      write: (batch) => createVerificationStatsRepository(db.db).add(batch),
      retentionSeconds: 86_400,
    });
    const inner = fakeVerify();
    const service = createTestService(db, {
      // every request re-reads its key's row, as one does 5 s after the last read
      auth: {
        revalidateMs: 0,
        lookup: {
          find: async (id) => (away(), repo.find(id)),
          touch: async (id) => (away(), repo.touch(id)),
          rememberOrigin: async (id, prefix) => (away(), repo.rememberOrigin(id, prefix)),
        },
      },
      verify: async (input, mode) => (away(), inner(input)),
      stats: recorder,
    });
    const nonce = new Uint8Array(32).fill(7);
    const body = { attestationToken: b64(token(nonce)), expectedNonce: b64(nonce) };
    for (const key of [live, test]) {
      const res = await verify(service.app, key.key, body);
      expect(await res.json()).toMatchObject({ isValid: true });
    }

    down = true;
    for (let i = 0; i < 5; i++)
      for (const key of [live, test, other]) {
        const res = await verify(service.app, key.key, body);
        // no database to take the request: 503 with Retry-After (issue 47), never a verdict
        expect(res.status).toBe(503);
        expect(res.headers.get('retry-after')).toBe('1');
      }
    const lines = service.logs.requests().filter((l) => l.status === 503);
    expect(lines).toHaveLength(15);
    expect(lines.filter((l) => l.apiKeyId === live.id && l.mode === 'live')).toHaveLength(5);
    expect(lines.filter((l) => l.apiKeyId === test.id && l.mode === 'test')).toHaveLength(5);
    // never verified here: its id is only what the client sent
    expect(lines.filter((l) => l.apiKeyId === other.id)).toHaveLength(0);
    down = false;
    await recorder.flush();

    const stats = createVerificationStatsRepository(db.db);
    const window = { since: new Date(Date.now() - 3600_000), until: new Date(Date.now() + 60_000) };
    const errorsOf = async (apiKeyId: string, mode: 'live' | 'test') =>
      (await stats.totals({ ...window, by: 'key', apiKeyId, mode }))
        .filter((t) => t.outcome === 'error')
        .map((t) => t.count);
    expect(await errorsOf(live.id, 'live')).toEqual([5]);
    expect(await errorsOf(test.id, 'test')).toEqual([5]);
    // the outage answers of the unverified key: counted, under no key
    expect(
      (await stats.totals({ ...window, by: 'key', mode: 'all' })).filter(
        (t) => t.outcome === 'error' && t.value === null,
      ),
    ).toEqual([{ value: null, mode: null, outcome: 'error', reason: null, count: 5 }]);
  });

  beforeAll(() => {
    down = false;
  });
  afterAll(() => {
    down = false;
  });
});
