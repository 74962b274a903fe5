/**
 * Fleet statistics through real servers: two instances on one PostgreSQL database add up within
 * seconds; on either database a server's shutdown writes the counts it still held.
 */
import { EventEmitter, once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig, type Config } from '../../src/config.js';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import { openDatabase } from '../../src/db/client.js';
import { createVerificationStatsRepository } from '../../src/db/verificationStats.js';
import { startServer } from '../../src/server/start.js';
import { postgresBackend } from '../support/databases.js';
import { TEST_MASTER_KEY_ENV } from '../support/secrets.js';
import { captureLogger } from '../support/service.js';
import { testMinter, verifyOn, type Instance } from '../support/twoInstances.js';

const APP = 'ABCDE12345.com.example.fleet';
const window = () => ({
  since: new Date(Date.now() - 3600_000),
  until: new Date(Date.now() + 60_000),
  by: 'app' as const,
});

/** An instance whose statistics flushes are events (`flush`, rows written). */
async function start(where: { url?: string; dataDir?: string }, flushMs: number) {
  const config: Config = {
    ...loadConfig({}, {}),
    databaseUrl: where.url,
    dataDir: where.dataDir ?? '',
    port: 0,
    host: '127.0.0.1',
    masterKey: TEST_MASTER_KEY_ENV,
    logLevel: 'warn',
  };
  const flushes = new EventEmitter();
  const server = await startServer(config, captureLogger('warn').logger, {
    migrate: true,
    statsFlushIntervalMs: flushMs,
    onStatsFlush: (rows) => flushes.emit('flush', rows),
  });
  const instance: Instance = { server, changes: new EventEmitter() };
  return { instance, flushes };
}

const pg = postgresBackend();

describe.skipIf(!pg)('two instances on one PostgreSQL database', () => {
  const closing: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const close of closing.reverse()) await close();
  });

  it('each counts its own verifications; the stats query sums both within seconds', async () => {
    const db = await pg!.open();
    closing.push(() => db.close());
    const a = await start({ url: db.url! }, 100);
    closing.push(() => a.instance.server.close());
    const b = await start({ url: db.url! }, 100);
    closing.push(() => b.instance.server.close());
    const minter = await testMinter(a.instance);
    await createAllowlistRepository(db.db, null).addApple(APP, undefined);
    a.instance.server.reloadNow();
    b.instance.server.reloadNow();

    expect(await verifyOn(a.instance, minter.key, await minter.registration(APP))).toBe(true);
    expect(await verifyOn(b.instance, minter.key, await minter.registration(APP))).toBe(true);
    expect(await verifyOn(b.instance, minter.key, await minter.registration(APP))).toBe(true);
    // an app that is not allowlisted: rejected before the verifier names the app (unknown)
    expect(
      await verifyOn(a.instance, minter.key, await minter.registration('ABCDE12345.com.nope.x1')),
    ).toBe(false);
    // what `attest stats` reads, from either instance's database handle: both instances' counts
    // within the 15 s the contract gives (each instance flushes every 100 ms here)
    const repo = createVerificationStatsRepository(a.instance.server.database.db);
    await expect
      .poll(async () => repo.totals({ ...window(), mode: 'test' }), {
        timeout: 15_000,
        interval: 100,
      })
      .toEqual([
        { value: APP, mode: 'test', outcome: 'valid', reason: null, count: 3 },
        {
          value: null,
          mode: 'test',
          outcome: 'rejected',
          reason: 'apple_app_not_allowed',
          count: 1,
        },
      ]);
  });
});

describe('shutdown writes the counts still held', () => {
  it.each([
    ['embedded', undefined],
    ['postgres', pg],
  ] as const)('on %s', async (kind, backend) => {
    if (kind === 'postgres' && !backend) return;
    const db = backend ? await backend.open() : undefined;
    const dir = mkdtempSync(join(tmpdir(), 'attest-fleet-'));
    try {
      // an hour between flushes: only the shutdown writes
      const s = await start(db ? { url: db.url! } : { dataDir: join(dir, 'data') }, 3600_000);
      const minter = await testMinter(s.instance);
      await createAllowlistRepository(s.instance.server.database.db, null).addApple(APP, 'any');
      s.instance.server.reloadNow();
      expect(await verifyOn(s.instance, minter.key, await minter.registration(APP))).toBe(true);
      const flushed = once(s.flushes, 'flush');
      await s.instance.server.close();
      expect(await flushed).toEqual([1]);
      const reader = db ?? (await openDatabase({ dataDir: join(dir, 'data'), role: 'cli' }));
      try {
        // a test key's (the minter's): counted apart from the live figures
        expect(
          await createVerificationStatsRepository(reader.db).totals({ ...window(), mode: 'test' }),
        ).toEqual([{ value: APP, mode: 'test', outcome: 'valid', reason: null, count: 1 }]);
      } finally {
        if (!db) await reader.close();
      }
    } finally {
      await db?.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
