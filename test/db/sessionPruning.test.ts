import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import postgres from 'postgres';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createApiKeyRepository } from '../../src/db/apiKeys.js';
import { rowsOf, type DatabaseHandle } from '../../src/db/database.js';
import { createSessionRepository } from '../../src/db/sessions.js';
import { startSessionPruner, type PruneRun } from '../../src/server/sessionPruner.js';
import { startServer, type RunningServer } from '../../src/server/start.js';
import { backends, clientOf, useDatabase } from '../support/databases.js';
import { captureLogger } from '../support/service.js';

const HOUR = 3600_000;

/** `n` sessions of key k1 in one statement, all expired `hoursAgo` hours ago (consumed too when asked) */
async function oldSessions(
  handle: DatabaseHandle,
  n: number,
  hoursAgo: number,
  options: { consumed?: boolean; prefix?: string } = {},
) {
  await handle.db.execute(sql`
    insert into attestation_sessions (reference, api_key_id, server_nonce, expires_at, consumed_at)
    select ${options.prefix ?? 'old'} || '_' || i, 'k1', ${randomBytes(32)}, now() - make_interval(secs => ${hoursAgo * 3600}),
           ${options.consumed ? sql`now() - make_interval(secs => ${hoursAgo * 3600})` : sql`null`}
    from generate_series(1, ${n}) as i`);
}

async function references(handle: DatabaseHandle): Promise<string[]> {
  return rowsOf<{ reference: string }>(
    await handle.db.execute(sql`select reference from attestation_sessions order by reference`),
  ).map((r) => r.reference);
}

describe.each(backends())('session pruning on $name', (backend) => {
  const handle = useDatabase(backend);
  beforeEach(async () => {
    await createApiKeyRepository(handle.db).insert({
      id: 'k1',
      name: 'k1',
      hash: 'h',
      expiresInSeconds: null,
    });
  });

  it('pruneBatch deletes at most `limit` sessions expired or consumed before the cut-off, and nothing else', async () => {
    const sessions = createSessionRepository(handle.db);
    await sessions.create({
      reference: 'live',
      apiKeyId: 'k1',
      serverNonce: randomBytes(32),
      ttlSeconds: 300,
    });
    await sessions.create({
      reference: 'used',
      apiKeyId: 'k1',
      serverNonce: randomBytes(32),
      ttlSeconds: 300,
    });
    await sessions.consume('used', 'k1');
    await oldSessions(handle, 5, 2);
    await oldSessions(handle, 1, 0.5, { prefix: 'recent' });
    const cutoff = new Date(Date.now() - HOUR);
    expect(await sessions.pruneBatch(cutoff, 3)).toBe(3);
    expect(await sessions.pruneBatch(cutoff, 3)).toBe(2);
    expect(await sessions.pruneBatch(cutoff, 3)).toBe(0);
    expect(await references(handle)).toEqual(['live', 'recent_1', 'used']);
    // a cut-off in the future (the injected clock) reaches the consumed one and the recent expired one
    expect(await sessions.pruneBatch(new Date(Date.now() + 60_000), 100)).toBe(2);
    expect(await references(handle)).toEqual(['live']);
  });

  it('the pruner deletes in bounded batches until done, with its own clock, and stops cleanly', async () => {
    await oldSessions(handle, 25, 0.5);
    await oldSessions(handle, 4, 0.5, { consumed: true, prefix: 'consumed' });
    const sessions = createSessionRepository(handle.db);
    const sizes: number[] = [];
    const runs: PruneRun[] = [];
    const done = new Promise<void>((resolve) => {
      const pruner = startSessionPruner({
        pruneBatch: async (cutoff, limit) => {
          const n = await sessions.pruneBatch(cutoff, limit);
          sizes.push(n!);
          return n;
        },
        retentionSeconds: 3600,
        // an hour later by this clock: sessions expired 30 min ago are past the 1 h retention
        now: () => Date.now() + HOUR,
        intervalMs: 10,
        batchSize: 10,
        onRun: (run) => {
          runs.push(run);
          void pruner.stop().then(resolve);
        },
      });
    });
    await sessions.create({
      reference: 'live',
      apiKeyId: 'k1',
      serverNonce: randomBytes(32),
      ttlSeconds: 300,
    });
    await done;
    expect(runs[0]).toEqual({ deleted: 29, skipped: false });
    expect(sizes).toEqual([10, 10, 9]);
    expect(await references(handle)).toEqual(['live']);
  });

  it('a failing batch is reported and the schedule goes on', async () => {
    const errors: unknown[] = [];
    let calls = 0;
    await new Promise<void>((resolve) => {
      const pruner = startSessionPruner({
        pruneBatch: async () => {
          if (++calls === 1) throw new Error('db down');
          void pruner.stop().then(resolve);
          return 0;
        },
        retentionSeconds: 3600,
        intervalMs: 10,
        onError: (err) => errors.push(err),
      });
    });
    expect(errors).toHaveLength(1);
    expect(calls).toBe(2);
  });

  if (backend.name === 'postgres') {
    it('with the advisory lock, only one instance prunes at a time: a batch is skipped while another holds it', async () => {
      await oldSessions(handle, 5, 2);
      const sessions = createSessionRepository(handle.db);
      const other = clientOf(handle.url, { max: 1 });
      try {
        const reserved = await other.reserve();
        await reserved`select pg_advisory_lock(${0x70727565})`;
        const cutoff = new Date(Date.now() - HOUR);
        expect(await sessions.pruneBatch(cutoff, 10, { advisoryLock: true })).toBeNull();
        expect(await references(handle)).toHaveLength(5);
        const skipped = await new Promise<PruneRun>((resolve) => {
          const pruner = startSessionPruner({
            pruneBatch: (c, limit) => sessions.pruneBatch(c, limit, { advisoryLock: true }),
            retentionSeconds: 3600,
            intervalMs: 10,
            onRun: (run) => void pruner.stop().then(() => resolve(run)),
          });
        });
        expect(skipped).toEqual({ deleted: 0, skipped: true });
        await reserved`select pg_advisory_unlock(${0x70727565})`;
        reserved.release();
        expect(await sessions.pruneBatch(cutoff, 10, { advisoryLock: true })).toBe(5);
        // the lock was the batch's transaction's: nothing is left held
        const held = rowsOf<{ n: number }>(
          await handle.db.execute(
            // this database's: tests in other workers migrate their own databases under advisory locks
            sql`select count(*)::int as n from pg_locks where locktype = 'advisory' and database = (select oid from pg_database where datname = current_database())`,
          ),
        );
        expect(held[0]!.n).toBe(0);
      } finally {
        await other.end();
      }
    });
  }
});

describe('startSessionPruner.stop', () => {
  it('does not wait beyond its bound for a batch that hangs', async () => {
    let entered!: () => void;
    const hanging = new Promise<void>((resolve) => (entered = resolve));
    const pruner = startSessionPruner({
      pruneBatch: () => {
        entered();
        return new Promise(() => {});
      },
      retentionSeconds: 60,
      intervalMs: 1,
    });
    await hanging;
    const started = performance.now();
    await pruner.stop(50);
    expect(performance.now() - started).toBeLessThan(5000);
  });
});

describe('ATTEST_SESSION_RETENTION', () => {
  it('defaults to 1h, takes a duration, and a bad one is a configuration error naming it', () => {
    expect(loadConfig({}, {}).sessionRetentionSeconds).toBe(3600);
    expect(loadConfig({}, { ATTEST_SESSION_RETENTION: '7d' }).sessionRetentionSeconds).toBe(
      7 * 86_400,
    );
    expect(() => loadConfig({}, { ATTEST_SESSION_RETENTION: 'soon' })).toThrow(
      /^environment variable ATTEST_SESSION_RETENTION must be a duration such as 30m, 1h or 7d, got "soon"$/,
    );
  });
});

describe('attest serve prunes by itself', () => {
  let dir: string;
  let server: RunningServer | undefined;
  const { logger, capture } = captureLogger();
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'attest-prune-'));
    const config = loadConfig(
      { dataDir: dir, port: 0, host: '127.0.0.1' },
      { ATTEST_SESSION_RETENTION: '30m' },
    );
    expect(config.sessionRetentionSeconds).toBe(1800);
    server = await startServer(config, logger, { migrate: true, pruneIntervalMs: 50 });
  });
  afterAll(async () => {
    await server?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('deletes sessions older than ATTEST_SESSION_RETENTION on its schedule, and logs it', async () => {
    await createApiKeyRepository(server!.database.db).insert({
      id: 'k1',
      name: 'k1',
      hash: 'h',
      expiresInSeconds: null,
    });
    await oldSessions(server!.database, 7, 1);
    await oldSessions(server!.database, 3, 0.25, { prefix: 'recent' });
    // bounded by the event (the log line), generously for a loaded machine
    await vi.waitFor(
      () =>
        expect(capture.lines.find((l) => l.msg === 'sessions pruned')).toMatchObject({
          deleted: 7,
          skipped: false,
        }),
      { timeout: 50_000, interval: 50 },
    );
    expect(await references(server!.database)).toEqual(['recent_1', 'recent_2', 'recent_3']);
  }, 60_000);
});
