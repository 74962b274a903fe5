import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { is } from 'drizzle-orm';
import { getTableConfig, PgTable } from 'drizzle-orm/pg-core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { GoogleServiceAccount } from '../../src/core/ports.js';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import { createApiKeyRepository } from '../../src/db/apiKeys.js';
import { createAuditRepository, type AuditEvent, type Auditor } from '../../src/db/audit.js';
import { AUDITED_COLUMNS, NOT_AUDITED, NOT_AUDITED_TABLES } from '../../src/db/auditedColumns.js';
import { tables } from '../../src/db/tables.js';
import { backends, type TestDatabase } from '../support/databases.js';
import { TEST_SECRETS } from '../support/secrets.js';

const TABLES = (Object.values(tables) as unknown[])
  .filter((v): v is PgTable => is(v, PgTable))
  .map((t) => getTableConfig(t));
const FILE = 'src/db/auditedColumns.ts';

/** the audited columns of a table, as the schema has them (not as the audit code lists them) */
function auditedColumnsOf(table: keyof typeof AUDITED_COLUMNS): string[] {
  const config = TABLES.find((t) => t.name === table)!;
  return config.columns.map((c) => c.name).filter((name) => !(name in NOT_AUDITED[table]));
}
const summaryKey = (table: keyof typeof AUDITED_COLUMNS, column: string) =>
  (AUDITED_COLUMNS[table] as Record<string, { key: string }>)[column]!.key;

describe('what the audit trail covers, derived from the drizzle schema', () => {
  it('every table is audited column by column, or named with the reason it is not', () => {
    const missing = TABLES.map((t) => t.name).filter(
      (name) => !(name in AUDITED_COLUMNS) && !(name in NOT_AUDITED_TABLES),
    );
    expect(
      missing,
      `table(s) ${missing.join(', ')} are not covered by the audit trail: add each to AUDITED_COLUMNS in ${FILE} (and record its changes), or to NOT_AUDITED_TABLES with the reason`,
    ).toEqual([]);
  });

  for (const table of Object.keys(AUDITED_COLUMNS) as (keyof typeof AUDITED_COLUMNS)[]) {
    it(`every column of ${table} is audited, or named with the reason it is not`, () => {
      const config = TABLES.find((t) => t.name === table);
      expect(config, `${table} is in AUDITED_COLUMNS but not in the schema`).toBeDefined();
      const columns = config!.columns.map((c) => c.name);
      for (const column of columns) {
        const audited = column in AUDITED_COLUMNS[table];
        const excused = column in NOT_AUDITED[table];
        expect(
          audited || excused,
          `column ${table}.${column} is not in the audit trail: add "${column}: { key: '<its name in the audit summary>' }" to AUDITED_COLUMNS.${table} in ${FILE}, or "${column}: '<why it is not part of what the service accepts>'" to NOT_AUDITED.${table}`,
        ).toBe(true);
        expect(
          audited && excused,
          `${table}.${column} is both audited and excused in ${FILE}`,
        ).toBe(false);
      }
      for (const listed of [
        ...Object.keys(AUDITED_COLUMNS[table]),
        ...Object.keys(NOT_AUDITED[table]),
      ])
        expect(columns, `${FILE} names ${table}.${listed}, which the schema has not`).toContain(
          listed,
        );
    });
  }
});

function serviceAccount(email: string): GoogleServiceAccount {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return {
    clientEmail: email,
    privateKeyId: randomBytes(20).toString('hex'),
    privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
  };
}

describe.each(backends())(
  'every change to what the service accepts is an event, on $name',
  (backend) => {
    let handle: TestDatabase;
    let auditor: Auditor;
    let fromId: number;
    const recorded = async (): Promise<AuditEvent[]> =>
      (await createAuditRepository(handle.db).list()).filter((e) => e.id > fromId);

    beforeAll(async () => {
      handle = await backend.open();
    }, 120_000);
    afterAll(async () => {
      await handle?.close();
    });
    beforeEach(async () => {
      await handle.reset();
      auditor = { actor: 'alice@ops', log: () => {} };
      fromId = Math.max(0, ...(await createAuditRepository(handle.db).list()).map((e) => e.id));
    });

    it('the events of an add carry every audited column of the schema', async () => {
      const allowlist = createAllowlistRepository(handle.db, TEST_SECRETS);
      await allowlist.addApple('ABCDE12345.com.x', 'any', auditor);
      await allowlist.addAndroid('com.x', null, {}, auditor);
      await createApiKeyRepository(handle.db).insert(
        { id: 'k1', name: 'ci', hash: 'h', expiresInSeconds: null },
        auditor,
      );
      const events = await recorded();
      const after = (target: string) => events.find((e) => e.target === target)!.after!;
      for (const [table, target] of [
        ['apple_apps', 'apple:ABCDE12345.com.x'],
        ['android_packages', 'android:com.x'],
        ['api_keys', 'k1'],
      ] as const)
        for (const column of auditedColumnsOf(table))
          expect(after(target), `${table}.${column}`).toHaveProperty(summaryKey(table, column));
    });

    it('turning every verdict requirement off is recorded with before and after', async () => {
      const allowlist = createAllowlistRepository(handle.db, TEST_SECRETS);
      await allowlist.addAndroid(
        'com.x',
        null,
        {
          requireLicensed: true,
          playProtectVerdicts: ['NO_ISSUES'],
          denyAppAccessRisk: ['UNKNOWN_CAPTURING'],
          maxDeviceActivity: 'LEVEL_2',
          minAccountActivity: 'TYPICAL_STRONG',
          denyLocationSpoofing: ['HIGH_RISK_DEVICE'],
        },
        auditor,
      );
      const off = {
        requireLicensed: false,
        playProtectVerdicts: [],
        denyAppAccessRisk: [],
        maxDeviceActivity: null,
        minAccountActivity: null,
        denyLocationSpoofing: [],
      };
      expect(await allowlist.addAndroid('com.x', null, off, auditor)).toEqual({
        package: 'updated',
        pair: 'none',
        observe: [],
      });
      const [, update] = await recorded();
      expect(update).toMatchObject({
        action: 'allowlist.update',
        before: {
          requireLicensed: true,
          playProtectVerdicts: ['NO_ISSUES'],
          denyAppAccessRisk: ['UNKNOWN_CAPTURING'],
          maxDeviceActivity: 'LEVEL_2',
          minAccountActivity: 'TYPICAL_STRONG',
          denyLocationSpoofing: ['HIGH_RISK_DEVICE'],
        },
        after: off,
      });
      // the same again changes nothing: no event, and not "updated"
      expect(await allowlist.addAndroid('com.x', null, off, auditor)).toEqual({
        package: 'unchanged',
        pair: 'none',
        observe: [],
      });
      expect(await recorded()).toHaveLength(2);
    });

    it("replacing the service account with another's is recorded by fingerprint, never the key", async () => {
      const allowlist = createAllowlistRepository(handle.db, TEST_SECRETS);
      const mine = serviceAccount('mine@p.iam.gserviceaccount.com');
      const theirs = serviceAccount('mine@p.iam.gserviceaccount.com'); // same email, another key
      await allowlist.addAndroid('com.x', null, { serviceAccount: mine }, auditor);
      await allowlist.addAndroid('com.x', null, { serviceAccount: mine }, auditor); // no change
      await allowlist.addAndroid('com.x', null, { serviceAccount: theirs }, auditor);
      await allowlist.addAndroid('com.x', null, { serviceAccount: null }, auditor);
      const events = await recorded();
      expect(events.map((e) => e.action)).toEqual([
        'allowlist.add',
        'allowlist.update',
        'allowlist.update',
      ]);
      const fingerprints = [events[0]!.after, events[1]!.after, events[2]!.after].map(
        (s) => s!.serviceAccount,
      );
      expect(fingerprints[0]).toMatch(
        /^mine@p\.iam\.gserviceaccount\.com spki-sha256:[0-9a-f]{64}$/,
      );
      expect(fingerprints[1]).not.toBe(fingerprints[0]);
      expect(fingerprints[2]).toBeNull();
      expect(events[1]!.before!.serviceAccount).toBe(fingerprints[0]);
      const text = JSON.stringify(events);
      for (const account of [mine, theirs]) {
        const body = account.privateKey.split('\n')[1]!;
        expect(text).not.toContain(body);
        expect(text).not.toContain(account.privateKeyId);
      }
    });

    it("dev mint gms's test-only key pair is recorded as allowlist.key.add, once", async () => {
      const allowlist = createAllowlistRepository(handle.db, TEST_SECRETS);
      await allowlist.addAndroid('com.x', null, {}, auditor);
      const make = async () => ({
        id: 'test-fp',
        decryptionKey: randomBytes(32),
        verificationKey: randomBytes(91),
        signingKey: randomBytes(138),
      });
      expect((await allowlist.ensureTestPair('com.x', make, auditor))?.created).toBe(true);
      expect((await allowlist.ensureTestPair('com.x', make, auditor))?.created).toBe(false);
      const events = await recorded();
      expect(events.map((e) => [e.action, e.target, e.before, e.after])).toEqual([
        ['allowlist.add', 'android:com.x', null, expect.anything()],
        [
          'allowlist.key.add',
          'android:com.x',
          { keyPairs: [], testKeyPairs: [] },
          { keyPairs: [], testKeyPairs: ['test-fp'] },
        ],
      ]);
      expect(await allowlist.removeAndroid('com.x', 'test-fp', auditor)).toBe(true);
      expect((await recorded()).at(-1)).toMatchObject({
        action: 'allowlist.key.remove',
        before: { testKeyPairs: ['test-fp'] },
        after: { testKeyPairs: [] },
      });
    });
  },
);
