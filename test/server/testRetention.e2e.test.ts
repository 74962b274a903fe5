// Test-mode state expires (ATTEST_TEST_RETENTION), on PGlite and PostgreSQL: with 5s, a test
// key's App Attest registration is gone within a minute (its next assertion is refused as
// apple_key_unknown) while a live one made at the same time keeps verifying; every other kind of
// row a test key makes goes too, in batches, and no live row is touched.
import { randomBytes } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import { createAndroidKeyRepository } from '../../src/db/androidKeys.js';
import type { Auditor } from '../../src/db/audit.js';
import { rowsOf } from '../../src/db/database.js';
import { createTestStateRepository } from '../../src/db/testState.js';
import { createVerificationStatsRepository } from '../../src/db/verificationStats.js';
import { startRetentionPruner } from '../../src/server/retentionPruner.js';
import {
  createAssertion,
  createAttestation,
  createDeviceKey,
  createTestCa,
  encodeAppleToken,
  TEST_APP_ID,
  TEST_NOW,
  type TestCa,
} from '../support/appleFactory.js';
import { backends, useDatabase } from '../support/databases.js';
import {
  captureLogger,
  createPlatformService,
  issueKey,
  verifySessionless,
} from '../support/service.js';

const auditor: Auditor = { actor: 'test', log: () => {} };

let ca: TestCa;
beforeAll(async () => {
  ca = await createTestCa();
});

describe.each(backends())('ATTEST_TEST_RETENTION on $name', (backend) => {
  const db = useDatabase(backend);

  /** rows of each table, per mode */
  const counts = async () => {
    const out: Record<string, { live: number; test: number }> = {};
    for (const table of [
      'apple_keys',
      'android_keys',
      'android_key_assertions',
      'device_velocity',
      'verification_stats',
      'verification_devices',
    ]) {
      const rows = rowsOf<{ live: number; test: number }>(
        await db.db.execute(
          sql.raw(`select count(*) filter (where mode = 'live')::int as live,
                     count(*) filter (where mode = 'test')::int as test from ${table}`),
        ),
      );
      out[table] = rows[0]!;
    }
    return out;
  };

  it('5s: the test registration is gone within a minute (apple_key_unknown), the live one stays; every test row goes, no live row', async () => {
    const retentionSeconds = loadConfig({}, { ATTEST_TEST_RETENTION: '5s' }).testRetentionSeconds;
    expect(retentionSeconds).toBe(5);
    const live = await issueKey(db, { name: 'live' });
    const test = await issueKey(db, { name: 'test', mode: 'test' });
    const service = createPlatformService(db, { now: TEST_NOW, appleRoots: ca.roots });
    await createAllowlistRepository(db.db, null).addApple(TEST_APP_ID, 'production', auditor);
    const liveDevice = await createDeviceKey();
    const testDevice = await createDeviceKey();
    const run = async (key: string, build: (nonce: Buffer) => Promise<Uint8Array> | Uint8Array) => {
      const res = await verifySessionless(service.app, key, build);
      return ((await res.json()) as { isValid: boolean }).isValid;
    };
    const register = (key: string, device: typeof liveDevice) =>
      run(key, async (nonce) =>
        encodeAppleToken({
          nonce,
          keyId: device.keyId,
          attestation: (await createAttestation(ca, device, { nonce })).attestation,
        }),
      );
    const assert = (key: string, device: typeof liveDevice, counter: number) =>
      run(key, (nonce) =>
        encodeAppleToken({
          nonce,
          keyId: device.keyId,
          assertion: createAssertion(device, { nonce, counter }).assertion,
        }),
      );
    expect(await register(live.key, liveDevice)).toBe(true);
    expect(await register(test.key, testDevice)).toBe(true);
    expect(await assert(test.key, testDevice, 1)).toBe(true);

    // one row of every other kind per mode, written an hour ago (older than the retention)
    const hourAgo = new Date(Date.now() - 3600_000);
    const minute = new Date(Math.floor(hourAgo.getTime() / 60_000) * 60_000);
    const day = new Date(Math.floor(hourAgo.getTime() / 86_400_000) * 86_400_000);
    const androidKeys = createAndroidKeyRepository(db.db);
    for (const mode of ['live', 'test'] as const) {
      await db.db.execute(sql`
        insert into android_keys (key_id, public_key, package_name, attestation_security_level,
          keymint_security_level, verified_boot_state, device_locked, verified_boot_key,
          attestation_version, mode)
        values (${randomBytes(32)}, ${randomBytes(91)}, 'com.example.app', 'TrustedEnvironment',
          'TrustedEnvironment', 'Verified', true, ${randomBytes(32)}, 300, ${mode})`);
      await androidKeys.recordAssertion({ digest: randomBytes(32), mode, at: hourAgo });
      await db.db.execute(sql`
        insert into device_velocity (service, key_id, mode, period_seconds, window_start, count, last_at)
        values ('apple', ${randomBytes(32)}, ${mode}, 3600, ${hourAgo.toISOString()}::timestamptz, 1,
          ${hourAgo.toISOString()}::timestamptz)`);
    }
    const statsRow = (mode: 'live' | 'test', apiKeyId: string) => ({
      minute,
      apiKeyId,
      mode,
      service: 'apple',
      app: TEST_APP_ID,
      outcome: 'valid' as const,
      reason: '',
      count: 3,
    });
    const device = (mode: 'live' | 'test') => ({
      day,
      app: TEST_APP_ID,
      mode,
      service: 'apple',
      device: randomBytes(16).toString('hex'),
      reason: '',
      lastAt: hourAgo,
    });
    await createVerificationStatsRepository(db.db).add({
      id: 'retention:1',
      rows: [statsRow('live', live.id), statsRow('test', test.id)],
      devices: [device('live'), device('test')],
    });
    const before = await counts();
    for (const table of Object.keys(before))
      expect(before[table], table).toEqual({ live: 1, test: 1 });

    const { logger, capture } = captureLogger();
    const pruner = startRetentionPruner('test-mode state', createTestStateRepository(db.db), {
      retentionSeconds: retentionSeconds!,
      advisoryLock: true,
      logger,
      intervalMs: 250,
    });
    try {
      // the registration is made seconds ago: it goes once it is 5 s old (the pruner runs every
      // 250 ms); waited for as an event, at most a minute
      const deadline = Date.now() + 60_000;
      while ((await counts()).apple_keys!.test > 0) {
        expect(Date.now(), 'the test registration is still there after a minute').toBeLessThan(
          deadline,
        );
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    } finally {
      await pruner.stop();
    }
    expect(await counts()).toEqual({
      apple_keys: { live: 1, test: 0 },
      android_keys: { live: 1, test: 0 },
      android_key_assertions: { live: 1, test: 0 },
      device_velocity: { live: 1, test: 0 },
      verification_stats: { live: 1, test: 0 },
      verification_devices: { live: 1, test: 0 },
    });
    expect(capture.lines.some((l) => l.msg === 'test-mode state pruned')).toBe(true);

    // the test device is unknown now; the live one still verifies
    expect(await assert(test.key, testDevice, 2)).toBe(false);
    expect(service.logs.last()).toMatchObject({ mode: 'test', reason: 'apple_key_unknown' });
    expect(await assert(live.key, liveDevice, 1)).toBe(true);
  }, 90_000);

  it('batches: many test rows go in bounded deletes, the count of each batch at most the limit per table', async () => {
    const repo = createTestStateRepository(db.db);
    const old = new Date(Date.now() - 3600_000);
    const keys = createAndroidKeyRepository(db.db);
    for (let i = 0; i < 25; i++)
      await keys.recordAssertion({ digest: randomBytes(32), mode: 'test', at: old });
    await keys.recordAssertion({ digest: randomBytes(32), mode: 'live', at: old });
    const cutoff = new Date();
    expect(await repo.pruneBatch(cutoff, 10)).toBe(10);
    expect(await repo.pruneBatch(cutoff, 10)).toBe(10);
    expect(await repo.pruneBatch(cutoff, 10)).toBe(5);
    expect(await repo.pruneBatch(cutoff, 10)).toBe(0);
    const left = rowsOf<{ mode: string }>(
      await db.db.execute(sql`select mode from android_key_assertions`),
    );
    expect(left).toEqual([{ mode: 'live' }]);
  });

  it('ATTEST_TEST_RETENTION: default 30d, a duration, else a configuration error', () => {
    expect(loadConfig({}, {}).testRetentionSeconds).toBe(30 * 86_400);
    expect(loadConfig({}, { ATTEST_TEST_RETENTION: '2h' }).testRetentionSeconds).toBe(7200);
    expect(() => loadConfig({}, { ATTEST_TEST_RETENTION: '30' })).toThrow(
      /ATTEST_TEST_RETENTION must be a duration such as 1h, 7d or 30d, got "30"/,
    );
  });
});
