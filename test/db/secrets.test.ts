import { createPrivateKey, randomBytes } from 'node:crypto';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import type { PostgresJsDatabase } from 'drizzle-orm/postgres-js';
import { migrate as migratePostgres } from 'drizzle-orm/postgres-js/migrator';
import { adminClient, databaseUrl } from '../support/embeddedServer.js';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { createDevCa } from '../../src/core/dev/devCa.js';
import { createTestPlayKeys } from '../../src/core/dev/playIntegrityMint.js';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import { createAuditRepository, type AuditEvent, type Auditor } from '../../src/db/audit.js';
import { createDevCaRepository } from '../../src/db/devCa.js';
import { openDatabase } from '../../src/db/client.js';
import { rowsOf, type DatabaseHandle } from '../../src/db/database.js';
import { MIGRATIONS_FOLDER, migrationStatus, runMigrations } from '../../src/db/migrate.js';
import { createSecretBox, type SecretBox } from '../../src/db/secretBox.js';
import { checkMasterKey, MasterKeyError, rotateMasterKey } from '../../src/db/secrets.js';
import { backends, useDatabase, type Backend, type TestDatabase } from '../support/databases.js';
import { createTestServiceAccount } from '../support/fakeGoogle.js';
import { testMasterKey } from '../support/secrets.js';

const KEY_A = testMasterKey(0xa1);
const KEY_B = testMasterKey(0xb2);
const boxA = createSecretBox([KEY_A]);
const boxB = createSecretBox([KEY_B]);
const logged: AuditEvent[] = [];
const auditor: Auditor = { actor: 'ops@test', log: (e) => logged.push(e) };

const pair = (id: string) => ({
  id,
  decryptionKey: new Uint8Array(randomBytes(32)),
  verificationKey: new Uint8Array(randomBytes(91)),
});

/** every value of every row of a table as raw bytes, plus the whole row as PostgreSQL prints it */
async function rawRows(handle: DatabaseHandle, table: string): Promise<Buffer[]> {
  const rows = rowsOf<Record<string, unknown>>(
    await handle.db.execute(sql`select *, t::text as whole from ${sql.identifier(table)} t`),
  );
  return rows.flatMap((r) =>
    Object.values(r).map((v) =>
      v instanceof Uint8Array ? Buffer.from(v) : Buffer.from(String(v)),
    ),
  );
}

/** fails when any raw value holds any 8-byte window of a key (as bytes, or as bytea hex text) */
async function expectNoKeyBytes(
  handle: DatabaseHandle,
  keys: Uint8Array[],
  table = 'android_key_pairs',
) {
  const raw = await rawRows(handle, table);
  expect(raw.length).toBeGreaterThan(0);
  for (const key of keys) {
    for (let i = 0; i + 8 <= key.length; i += 8) {
      const window = Buffer.from(key.subarray(i, i + 8));
      for (const value of raw) {
        expect(value.indexOf(window)).toBe(-1);
        expect(value.indexOf(window.toString('hex'))).toBe(-1);
      }
    }
  }
}

/** a database at the first release's schema (migration 0000 only), as a 0.1 installation has it */
async function openAtFirstRelease(
  backend: Backend['name'],
): Promise<{ handle: DatabaseHandle; close(): Promise<void> }> {
  const folder = mkdtempSync(join(tmpdir(), 'attest-migrations-'));
  cpSync(MIGRATIONS_FOLDER, folder, { recursive: true });
  const journal = JSON.parse(readFileSync(join(folder, 'meta', '_journal.json'), 'utf8')) as {
    entries: unknown[];
  };
  journal.entries = journal.entries.slice(0, 1);
  writeFileSync(join(folder, 'meta', '_journal.json'), JSON.stringify(journal));
  try {
    const adminUrl =
      backend === 'embedded' ? inject('embeddedUrl') : process.env.TEST_DATABASE_URL!;
    const name = `attest_test_old_${randomBytes(5).toString('hex')}`;
    const admin = adminClient(adminUrl);
    await admin.unsafe(`create database ${name}`);
    await admin.end();
    const handle = await openDatabase({
      url: databaseUrl(adminUrl, name),
      dataDir: '',
      role: 'cli',
      poolSize: 4,
    });
    await migratePostgres(handle.db as unknown as PostgresJsDatabase<Record<string, never>>, {
      migrationsFolder: folder,
    });
    return {
      handle,
      async close() {
        await handle.close();
        const cleanup = adminClient(adminUrl);
        await cleanup.unsafe(`drop database if exists ${name} with (force)`);
        await cleanup.end();
      },
    };
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
}

describe.each(backends())('sealed secrets on $name', (backend) => {
  const handle = useDatabase(backend);
  beforeEach(async () => {
    await handle.db.execute(sql`delete from master_key_check`);
  });

  const seed = async (box: SecretBox) => {
    await checkMasterKey(handle.db, box, { source: 'test' });
    const repo = createAllowlistRepository(handle.db, box);
    const pairs = [pair('p1'), pair('p2')];
    await repo.addAndroid('com.example.one', pairs[0]!, {});
    await repo.addAndroid('com.example.two', pairs[1]!, {});
    return pairs;
  };

  it('a raw select of android_key_pairs shows no key bytes; the repository opens them again', async () => {
    const pairs = await seed(boxA);
    await expectNoKeyBytes(
      handle,
      pairs.flatMap((p) => [p.decryptionKey, p.verificationKey]),
    );
    const ids = rowsOf<{ master_key_id: string }>(
      await handle.db.execute(sql`select master_key_id from android_key_pairs`),
    );
    expect(ids.map((r) => r.master_key_id)).toEqual([KEY_A.id, KEY_A.id]);
    const listed = await createAllowlistRepository(handle.db, boxA).listAndroid();
    expect(listed.map((p) => p.keys)).toEqual(pairs.map((p) => [p]));
  });

  it('the other secrets are sealed too (a test-only pair with its signing key, the development CA key, a service account), and rotation re-wraps them', async () => {
    await checkMasterKey(handle.db, boxA, { source: 'test' });
    const repo = createAllowlistRepository(handle.db, boxA);
    const sa = createTestServiceAccount();
    await repo.addAndroid('com.example.one', null, { serviceAccount: sa.account });
    await repo.addAndroid('com.example.two', null, {});
    const testPair = createTestPlayKeys();
    expect((await repo.ensureTestPair('com.example.one', async () => testPair))?.created).toBe(
      true,
    );
    const ca = await createDevCa(new Date());
    await createDevCaRepository(handle.db, boxA).put(ca, { replace: false });

    // a PKCS#8 EC key carries its public point too, which the certificate shows: look for the private scalar
    const scalar = (pkcs8: Uint8Array) =>
      new Uint8Array(
        Buffer.from(
          createPrivateKey({ key: Buffer.from(pkcs8), format: 'der', type: 'pkcs8' }).export({
            format: 'jwk',
          }).d!,
          'base64url',
        ),
      );
    await expectNoKeyBytes(handle, [
      testPair.decryptionKey,
      testPair.verificationKey,
      scalar(testPair.signingKey),
    ]);
    await expectNoKeyBytes(handle, [scalar(ca.intermediateKey)], 'dev_ca');
    await expectNoKeyBytes(
      handle,
      [new TextEncoder().encode(sa.account.privateKey.replace(/-----[A-Z ]+-----|\s/g, ''))],
      'android_packages',
    );
    // a package without a service account holds no secret: it is neither clear nor sealed
    await checkMasterKey(handle.db, boxA, { source: 'test' });

    expect(
      (await rotateMasterKey(handle.db, createSecretBox([KEY_B, KEY_A]), 'test', auditor))
        .rewrapped,
    ).toBe(3);
    await expect(createAllowlistRepository(handle.db, boxA).listAndroid()).rejects.toBeInstanceOf(
      MasterKeyError,
    );
    await expect(createDevCaRepository(handle.db, boxA).get()).rejects.toBeInstanceOf(
      MasterKeyError,
    );
    const listed = await createAllowlistRepository(handle.db, boxB).listAndroid();
    expect(listed.find((p) => p.packageName === 'com.example.one')?.serviceAccount).toEqual(
      sa.account,
    );
    expect(
      (
        await createAllowlistRepository(handle.db, boxB).ensureTestPair(
          'com.example.one',
          async () => createTestPlayKeys(),
        )
      )?.pair,
    ).toEqual(testPair);
    expect((await createDevCaRepository(handle.db, boxB).get())?.intermediateKey).toEqual(
      ca.intermediateKey,
    );
  });

  it('a value moved to another row does not open', async () => {
    await seed(boxA);
    await handle.db.execute(
      sql`update android_key_pairs set decryption_key = (select decryption_key from android_key_pairs where id = 'p2') where id = 'p1'`,
    );
    await expect(createAllowlistRepository(handle.db, boxA).listAndroid()).rejects.toThrow(
      /cannot open key pair p1 of com\.example\.one/,
    );
  });

  it('a wrong master key is refused at the check, naming the expected and the given key id', async () => {
    await seed(boxA);
    const error = await checkMasterKey(handle.db, boxB, { source: '/etc/attest/other.key' }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(MasterKeyError);
    expect((error as Error).message).toBe(
      `wrong master key: the database's secrets are sealed with master key ${KEY_A.id}, but the key given (/etc/attest/other.key) is ${KEY_B.id}; give the key ${KEY_A.id} (ATTEST_MASTER_KEY_FILE)`,
    );
    // and the repository never hands a verifier keys it could not open
    await expect(createAllowlistRepository(handle.db, boxB).listAndroid()).rejects.toBeInstanceOf(
      MasterKeyError,
    );
  });

  it('the check value alone refuses a wrong key before any secret is stored', async () => {
    await checkMasterKey(handle.db, boxA, { source: 'a' });
    await expect(checkMasterKey(handle.db, boxB, { source: 'b' })).rejects.toThrow(
      new RegExp(`sealed with master key ${KEY_A.id}.*given \\(b\\) is ${KEY_B.id}`),
    );
    // read-only commands do not establish a key
    await handle.db.execute(sql`delete from master_key_check`);
    await checkMasterKey(handle.db, boxB, { source: 'b', establish: false });
    expect(rowsOf(await handle.db.execute(sql`select 1 from master_key_check`))).toHaveLength(0);
  });

  it('rotation re-wraps every row; afterwards only the new key opens them', async () => {
    const pairs = await seed(boxA);
    const recorded = (await createAuditRepository(handle.db).list({ action: 'master_key.rotate' }))
      .length;
    const result = await rotateMasterKey(handle.db, createSecretBox([KEY_B, KEY_A]), 'a', auditor);
    expect(result).toEqual({ rewrapped: 2, previousKeyId: KEY_A.id });
    // the event names key ids only, and reaches the log once committed
    const events = (
      await createAuditRepository(handle.db).list({ action: 'master_key.rotate' })
    ).slice(recorded);
    expect(events).toMatchObject([
      {
        actor: 'ops@test',
        action: 'master_key.rotate',
        target: KEY_B.id,
        before: { keyId: KEY_A.id },
        after: { keyId: KEY_B.id, rewrapped: 2 },
      },
    ]);
    expect(logged.at(-1)).toEqual(events[0]);
    await expectNoKeyBytes(
      handle,
      pairs.flatMap((p) => [p.decryptionKey, p.verificationKey]),
    );
    expect(
      (await createAllowlistRepository(handle.db, boxB).listAndroid()).map((p) => p.keys),
    ).toEqual(pairs.map((p) => [p]));
    await checkMasterKey(handle.db, boxB, { source: 'b' });
    await expect(checkMasterKey(handle.db, boxA, { source: 'a' })).rejects.toThrow(
      new RegExp(`sealed with master key ${KEY_B.id}`),
    );
    await expect(createAllowlistRepository(handle.db, boxA).listAndroid()).rejects.toBeInstanceOf(
      MasterKeyError,
    );
    await expect(
      rotateMasterKey(handle.db, createSecretBox([KEY_B, KEY_A]), 'a', auditor),
    ).rejects.toThrow(/already sealed with master key/);
  });

  it('a rotation that fails on one row changes nothing', async () => {
    await seed(boxA);
    const repo = createAllowlistRepository(handle.db, boxA);
    await repo.addAndroid('com.example.three', pair('p3'), {});
    // one row damaged: its data key no longer unwraps
    await handle.db.execute(
      sql`update android_key_pairs set verification_key = set_byte(verification_key, 20, get_byte(verification_key, 20) # 1) where id = 'p3'`,
    );
    const before = rowsOf(
      await handle.db.execute(
        sql`select id, decryption_key, verification_key, master_key_id from android_key_pairs order by id`,
      ),
    );
    const loggedBefore = logged.length;
    const trail = await createAuditRepository(handle.db).list({ action: 'master_key' });
    await expect(
      rotateMasterKey(handle.db, createSecretBox([KEY_B, KEY_A]), 'a', auditor),
    ).rejects.toThrow();
    expect(await createAuditRepository(handle.db).list({ action: 'master_key' })).toEqual(trail);
    expect(logged).toHaveLength(loggedBefore);
    expect(
      rowsOf(
        await handle.db.execute(
          sql`select id, decryption_key, verification_key, master_key_id from android_key_pairs order by id`,
        ),
      ),
    ).toEqual(before);
    await checkMasterKey(handle.db, boxA, { source: 'a' });
  });

  describe('a database of the previous release, keys in clear', () => {
    let old: Awaited<ReturnType<typeof openAtFirstRelease>>;
    const clear = [pair('c1'), pair('c2')];
    beforeEach(async () => {
      old = await openAtFirstRelease(backend.name);
      await old.handle.db.execute(
        sql`insert into android_packages (package_name) values ('com.example.old')`,
      );
      for (const p of clear) {
        await old.handle.db.execute(
          sql`insert into android_key_pairs (package_name, id, decryption_key, verification_key) values ('com.example.old', ${p.id}, ${Buffer.from(p.decryptionKey)}, ${Buffer.from(p.verificationKey)})`,
        );
      }
    });

    it('the migration path seals them, once', async () => {
      try {
        // the detector itself sees the clear keys
        await expect(expectNoKeyBytes(old.handle, [clear[0]!.decryptionKey])).rejects.toThrow();
        const pending = (await migrationStatus(old.handle.db)).filter((m) => !m.applied).length;
        expect(pending).toBeGreaterThan(0);
        expect(await runMigrations(old.handle, { secrets: { box: boxA, source: 'a' } })).toEqual({
          applied: pending,
          sealed: 2,
        });
        await expectNoKeyBytes(
          old.handle,
          clear.flatMap((p) => [p.decryptionKey, p.verificationKey]),
        );
        expect(
          (await createAllowlistRepository(old.handle.db, boxA).listAndroid())[0]!.keys,
        ).toEqual(clear);
        await checkMasterKey(old.handle.db, boxA, { source: 'a' });
        expect(await runMigrations(old.handle, { secrets: { box: boxA, source: 'a' } })).toEqual({
          applied: 0,
          sealed: 0,
        });
      } finally {
        await old.close();
      }
    });

    it('schema migrated without the data step (an interrupted run): the check refuses, the next migration seals', async () => {
      try {
        await runMigrations(old.handle);
        await expect(checkMasterKey(old.handle.db, boxA, { source: 'a' })).rejects.toThrow(
          /2 row\(s\) of android_key_pairs hold secrets in clear: run "attest db migrate"/,
        );
        await expect(createAllowlistRepository(old.handle.db, boxA).listAndroid()).rejects.toThrow(
          /stored in clear: run "attest db migrate"/,
        );
        expect(await runMigrations(old.handle, { secrets: { box: boxA, source: 'a' } })).toEqual({
          applied: 0,
          sealed: 2,
        });
        await expectNoKeyBytes(
          old.handle,
          clear.flatMap((p) => [p.decryptionKey, p.verificationKey]),
        );
      } finally {
        await old.close();
      }
    });

    it('a migration with a wrong key seals nothing', async () => {
      try {
        await runMigrations(old.handle);
        await checkMasterKey(old.handle.db, boxA, { source: 'a', allowClear: true });
        await expect(
          runMigrations(old.handle, { secrets: { box: boxB, source: 'b' } }),
        ).rejects.toBeInstanceOf(MasterKeyError);
        const ids = rowsOf<{ master_key_id: string | null }>(
          await old.handle.db.execute(sql`select master_key_id from android_key_pairs`),
        );
        expect(ids).toEqual([{ master_key_id: null }, { master_key_id: null }]);
      } finally {
        await old.close();
      }
    });
  });
});
