/**
 * A key's scope changed through one instance applies on another at once on PostgreSQL: both
 * re-read rows only every ten minutes, so only the change notification (the api_key_scopes
 * migration adds `apps` to the api_keys trigger) can explain the second instance following.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import { createApiKeyRepository } from '../../src/db/apiKeys.js';
import { postgresBackend, type TestDatabase } from '../support/databases.js';
import { issueKey } from '../support/service.js';
import {
  nextChange,
  startInstance,
  testMinter,
  verifyOn,
  type Instance,
} from '../support/twoInstances.js';

const TEN_MINUTES = 600_000;
const APP_A = 'ABCDE12345.com.example.scope.a';
const APP_B = 'ABCDE12345.com.example.scope.b';
const pg = postgresBackend();

describe.skipIf(!pg)('a key scope change between two instances on PostgreSQL', () => {
  let db: TestDatabase;
  let a: Instance;
  let b: Instance;
  let minter: Awaited<ReturnType<typeof testMinter>>;

  beforeAll(async () => {
    db = await pg!.open();
    a = await startInstance(db.url!, TEN_MINUTES);
    b = await startInstance(db.url!, TEN_MINUTES);
    minter = await testMinter(a);
    const allowlist = createAllowlistRepository(db.db, null);
    const heard = nextChange(b, 'apple_apps');
    await allowlist.addApple(APP_A, undefined);
    await allowlist.addApple(APP_B, undefined);
    await heard;
  });
  afterAll(async () => {
    await a?.server.close();
    await b?.server.close();
    await db?.close();
  });

  it('widening and narrowing a scope through one instance reach the other once announced', async () => {
    const scoped = await issueKey(db, { name: 'rp a', mode: 'test', apps: [APP_A] });
    // b verifies (and caches) the key with its first scope
    expect(await verifyOn(b, scoped.key, await minter.registration(APP_A))).toBe(true);
    expect(await verifyOn(b, scoped.key, await minter.registration(APP_B))).toBe(false);

    const repo = createApiKeyRepository(a.server.database.db);
    let heard = nextChange(b, 'api_keys');
    await repo.setApps(scoped.id, [APP_A, APP_B]);
    await heard;
    expect(await verifyOn(b, scoped.key, await minter.registration(APP_B))).toBe(true);

    heard = nextChange(b, 'api_keys');
    await repo.setApps(scoped.id, [APP_A]);
    await heard;
    expect(await verifyOn(b, scoped.key, await minter.registration(APP_B))).toBe(false);
  });
});
