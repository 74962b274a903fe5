/**
 * Changes take effect at once on PostgreSQL: two instances on one database, each with a fallback
 * re-read interval of ten minutes, so only a LISTEN/NOTIFY announcement can explain a change
 * reaching the instance that did not make it. Also the in-process reloadNow entry point.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import { createApiKeyRepository } from '../../src/db/apiKeys.js';
import { createRevocationRepository } from '../../src/db/androidRevocations.js';
import { rowsOf } from '../../src/db/database.js';
import { sql } from 'drizzle-orm';
import { postgresBackend, type TestDatabase } from '../support/databases.js';
import {
  nextChange,
  startInstance,
  testMinter,
  verifyOn,
  type Instance,
} from '../support/twoInstances.js';

const TEN_MINUTES = 600_000;
const pg = postgresBackend();

describe.skipIf(!pg)('change notifications between two instances on PostgreSQL', () => {
  let db: TestDatabase;
  let a: Instance;
  let b: Instance;
  let minter: Awaited<ReturnType<typeof testMinter>>;

  beforeAll(async () => {
    db = await pg!.open();
    a = await startInstance(db.url!, TEN_MINUTES);
    b = await startInstance(db.url!, TEN_MINUTES);
    minter = await testMinter(a);
  });
  afterAll(async () => {
    await a?.server.close();
    await b?.server.close();
    await db?.close();
  });

  it('without a pooler ATTEST_CHANGE_FEED=auto (the default) keeps LISTEN/NOTIFY', () => {
    for (const i of [a, b]) expect(i.server.database.connections?.feed).toBe('notify');
  });

  it('an app allowlisted through one instance is valid on the other once announced', async () => {
    const body = await minter.registration('ABCDE12345.com.example.notify');
    // b reads (and caches) an allowlist without the app
    expect(await verifyOn(b, minter.key, body)).toBe(false);
    const heard = nextChange(b, 'apple_apps');
    await createAllowlistRepository(a.server.database.db, null).addApple(
      'ABCDE12345.com.example.notify',
      undefined,
    );
    await heard;
    expect(await verifyOn(b, minter.key, body)).toBe(true);
  });

  it('an app removed is refused on the other instance once announced', async () => {
    const appId = 'ABCDE12345.com.example.removed';
    const repo = createAllowlistRepository(db.db, null);
    let heard = nextChange(b, 'apple_apps');
    await repo.addApple(appId, undefined);
    await heard;
    expect(await verifyOn(b, minter.key, await minter.registration(appId))).toBe(true);
    heard = nextChange(b, 'apple_apps');
    await repo.removeApple(appId);
    await heard;
    expect(await verifyOn(b, minter.key, await minter.registration(appId))).toBe(false);
  });

  it('a key revoked elsewhere is refused by both instances once announced', async () => {
    const init = (i: Instance) =>
      fetch(`${i.server.url}/api/v1/attestation/init`, {
        method: 'POST',
        headers: { 'X-Api-Key': minter.key },
      });
    expect((await init(a)).status).toBe(200);
    expect((await init(b)).status).toBe(200);
    const heard = Promise.all([nextChange(a, 'api_keys'), nextChange(b, 'api_keys')]);
    const id = minter.key.slice('attest_'.length, 'attest_'.length + 16);
    expect(await createApiKeyRepository(db.db).revoke(id)).toBe(true);
    await heard;
    expect((await init(a)).status).toBe(403);
    expect((await init(b)).status).toBe(403);
  });

  it('a new attestation status list stored through one connection is announced to both instances', async () => {
    const heard = Promise.all([
      nextChange(a, 'android_revocations'),
      nextChange(b, 'android_revocations'),
    ]);
    const stored = await createRevocationRepository(db.db).replace(
      new Map([[0xabcdefn, { status: 'REVOKED' }]]),
      'file status.json',
      new Date(),
    );
    expect(stored).toBe(true);
    await heard;
  });

  it('a key being used does not notify (last_used_at is not a change to announce)', async () => {
    const rows = rowsOf<{ tgname: string }>(
      await db.db.execute(
        sql`select tgname from pg_trigger where tgname like 'attest_%_changed' order by tgname`,
      ),
    );
    expect(rows.map((r) => r.tgname)).toEqual([
      'attest_android_key_pairs_changed',
      'attest_android_packages_changed',
      'attest_android_revocations_changed',
      'attest_api_keys_changed',
      'attest_apple_apps_changed',
      'attest_dev_ca_changed',
    ]);
    const heard: string[] = [];
    b.changes.on('change', (table: string) => heard.push(table));
    await db.db.execute(sql`update api_keys set last_used_at = now()`);
    // a later announced change arrives after any announcement of the touch would have
    const later = nextChange(b, 'apple_apps');
    await createAllowlistRepository(db.db, null).addApple('ABCDE12345.com.example.later', 'any');
    await later;
    expect(heard).toEqual(['apple_apps']);
  });
});

describe.skipIf(!pg)('reloadNow', () => {
  let db: TestDatabase;
  let a: Instance;

  beforeAll(async () => {
    db = await pg!.open();
    a = await startInstance(db.url!, TEN_MINUTES);
  });
  afterAll(async () => {
    await a?.server.close();
    await db?.close();
  });

  it('applies a change the instance was not told of, without waiting for the re-read interval', async () => {
    const minter = await testMinter(a);
    const appId = 'ABCDE12345.com.example.reload';
    const body = await minter.registration(appId);
    expect(await verifyOn(a, minter.key, body)).toBe(false);
    // written with the triggers off: no announcement, as when one is lost
    await db.db.transaction(async (tx) => {
      await tx.execute(sql`set local session_replication_role = replica`);
      await tx.execute(sql`insert into apple_apps (app_id, env) values (${appId}, 'production')`);
    });
    expect(await verifyOn(a, minter.key, body)).toBe(false);
    a.server.reloadNow();
    expect(await verifyOn(a, minter.key, body)).toBe(true);
  });
});
