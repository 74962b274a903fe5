/**
 * A key's rejection details turned on through one instance apply on another at once on
 * PostgreSQL: both re-read rows only every ten minutes, so only the change notification (the
 * migration adds `rejection_details` to the api_keys trigger) can explain the second following.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKeyRepository } from '../../src/db/apiKeys.js';
import { postgresBackend, type TestDatabase } from '../support/databases.js';
import { issueKey } from '../support/service.js';
import { nextChange, startInstance, type Instance } from '../support/twoInstances.js';

const TEN_MINUTES = 600_000;
const pg = postgresBackend();

/** A sessionless verify of a token that is not CBOR: rejected (token_malformed), the body read. */
async function rejectedBody(instance: Instance, key: string): Promise<unknown> {
  const res = await fetch(`${instance.server.url}/api/v1/attestation/verify`, {
    method: 'POST',
    headers: { 'X-Api-Key': key, 'Content-Type': 'application/json' },
    body: JSON.stringify({
      attestationToken: Buffer.from('not cbor').toString('base64'),
      expectedNonce: Buffer.alloc(32, 1).toString('base64'),
    }),
  });
  expect(res.status).toBe(200);
  return res.json();
}

describe.skipIf(!pg)('rejection details changed between two instances on PostgreSQL', () => {
  let db: TestDatabase;
  let a: Instance;
  let b: Instance;

  beforeAll(async () => {
    db = await pg!.open();
    a = await startInstance(db.url!, TEN_MINUTES);
    b = await startInstance(db.url!, TEN_MINUTES);
  });
  afterAll(async () => {
    await a?.server.close();
    await b?.server.close();
    await db?.close();
  });

  it('on and off through one instance reach the other once announced', async () => {
    const key = await issueKey(db, { name: 'rp' });
    // b verifies (and caches) the key without the option
    expect(await rejectedBody(b, key.key)).toEqual({ isValid: false, statusCode: 0 });

    const repo = createApiKeyRepository(a.server.database.db);
    let heard = nextChange(b, 'api_keys');
    await repo.setRejectionDetails(key.id, true);
    await heard;
    expect(await rejectedBody(b, key.key)).toEqual({
      isValid: false,
      statusCode: 0,
      rejection: { reason: 'token_malformed' },
    });

    heard = nextChange(b, 'api_keys');
    await repo.setRejectionDetails(key.id, false);
    await heard;
    expect(await rejectedBody(b, key.key)).toEqual({ isValid: false, statusCode: 0 });
  });
});
