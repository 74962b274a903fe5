// Token captures (ATTEST_CAPTURE) in the database, on the embedded database and PostgreSQL: the
// token is sealed (the raw column does not hold its bytes), each read is audited, the count and
// byte bounds drop the oldest of the same API key mode first, and the age pruner deletes by age.
import { randomBytes } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import type { AuditEvent, Auditor } from '../../src/db/audit.js';
import { rowsOf } from '../../src/db/database.js';
import { createCaptureRepository, type CaptureInput } from '../../src/db/captures.js';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import { checkMasterKey } from '../../src/db/secrets.js';
import { backends, useDatabase } from '../support/databases.js';
import { TEST_SECRETS } from '../support/secrets.js';

const APP = 'ABCDE12345.com.example.capture';

function capture(overrides: Partial<CaptureInput> = {}): CaptureInput {
  return {
    verifiedAt: new Date(),
    mode: 'live',
    apiKeyId: 'k1k1k1k1k1k1k1k1',
    appScope: null,
    nonce: randomBytes(32),
    service: 'apple',
    app: APP,
    entry: 'apple',
    valid: false,
    reason: 'apple_key_unknown',
    detail: 'no key registered',
    checks: [{ id: 'token.cbor', status: 'pass', detail: 'ok' }],
    token: randomBytes(300),
    ...overrides,
  };
}

const BIG = { count: 1000, bytes: 64 * 1024 ** 2 };

describe.each(backends())('token captures on $name', (backend) => {
  const db = useDatabase(backend);

  it('seals the token: the raw column does not hold its bytes; a read opens it and is audited', async () => {
    const repo = createCaptureRepository(db.db);
    await createAllowlistRepository(db.db, null).addApple(APP, 'production', {
      actor: 'test',
      log: () => {},
    });
    const token = randomBytes(400);
    const kept = await repo.record(capture({ token }), TEST_SECRETS, BIG);
    const raw = rowsOf<{ token: Uint8Array; master_key_id: string; policy: unknown }>(
      await db.db.execute(sql`select token, master_key_id, policy from token_captures`),
    );
    expect(raw).toHaveLength(1);
    const stored = Buffer.from(raw[0]!.token);
    expect(stored.includes(token.subarray(0, 32))).toBe(false);
    expect(stored.includes(token)).toBe(false);
    expect(raw[0]!.master_key_id).toBe(TEST_SECRETS.keyId);
    // the app's entry as the audit trail summarises it
    expect(raw[0]!.policy).toMatchObject({ env: 'production' });
    // the start-up check covers the table (it is one of the sealed ones)
    await expect(checkMasterKey(db.db, TEST_SECRETS, { source: 'test' })).resolves.toBeUndefined();

    const logged: AuditEvent[] = [];
    const auditor: Auditor = { actor: 'alice', log: (e) => logged.push(e) };
    const read = await repo.read(kept!.id, TEST_SECRETS, auditor, 'get');
    expect(Buffer.from(read!.token).equals(token)).toBe(true);
    expect(read).toMatchObject({ reason: 'apple_key_unknown', mode: 'live', app: APP });
    expect(read!.policy).toEqual(read!.policyNow);
    expect(logged).toMatchObject([
      { actor: 'alice', action: 'capture.read', target: `capture:${kept!.id}` },
    ]);
    const events = rowsOf<{ action: string }>(
      await db.db.execute(sql`select action from audit_events where action = 'capture.read'`),
    );
    expect(events).toHaveLength(1);
    expect(await repo.read('0000000000000000', TEST_SECRETS, auditor, 'get')).toBeNull();
  });

  it('count bound: the oldest of the same mode go first; test captures never push out live ones', async () => {
    const repo = createCaptureRepository(db.db);
    const base = Date.now() - 60_000;
    const ids: string[] = [];
    for (let i = 0; i < 5; i++)
      ids.push(
        (await repo.record(capture({ verifiedAt: new Date(base + i * 1000) }), TEST_SECRETS, {
          count: 3,
          bytes: BIG.bytes,
        }))!.id,
      );
    for (let i = 0; i < 4; i++)
      await repo.record(
        capture({ mode: 'test', verifiedAt: new Date(base + 10_000 + i) }),
        TEST_SECRETS,
        {
          count: 3,
          bytes: BIG.bytes,
        },
      );
    const live = await repo.list({ mode: 'live', limit: 100 });
    expect(live.map((c) => c.id)).toEqual([ids[4], ids[3], ids[2]]);
    expect(await repo.list({ mode: 'test', limit: 100 })).toHaveLength(3);
  });

  it('byte bound: tokens beyond the bytes go oldest first; a token larger than the bound is not kept', async () => {
    const repo = createCaptureRepository(db.db);
    const bound = { count: 1000, bytes: 100 * 1024 };
    const base = Date.now() - 60_000;
    const ids: string[] = [];
    for (let i = 0; i < 4; i++)
      ids.push(
        (await repo.record(
          capture({ token: randomBytes(40 * 1024), verifiedAt: new Date(base + i * 1000) }),
          TEST_SECRETS,
          bound,
        ))!.id,
      );
    expect((await repo.list({ mode: 'live', limit: 100 })).map((c) => c.id)).toEqual([
      ids[3],
      ids[2],
    ]);
    expect(
      await repo.record(capture({ token: randomBytes(101 * 1024) }), TEST_SECRETS, bound),
    ).toBeNull();
    expect(await repo.list({ mode: 'live', limit: 100 })).toHaveLength(2);
  });

  it('list filters: reason, app, since; newest first', async () => {
    const repo = createCaptureRepository(db.db);
    const now = Date.now();
    await repo.record(capture({ verifiedAt: new Date(now - 7200_000) }), TEST_SECRETS, BIG);
    await repo.record(
      capture({ reason: 'nonce_mismatch', verifiedAt: new Date(now - 60_000) }),
      TEST_SECRETS,
      BIG,
    );
    await repo.record(
      capture({ app: 'com.example.other', service: 'gms', entry: 'android' }),
      TEST_SECRETS,
      BIG,
    );
    await repo.record(capture({ valid: true, reason: null, detail: null }), TEST_SECRETS, BIG);
    expect(await repo.list({ mode: 'live', reason: 'nonce_mismatch', limit: 10 })).toHaveLength(1);
    expect(await repo.list({ mode: 'live', reason: 'none', limit: 10 })).toMatchObject([
      { valid: true },
    ]);
    expect(await repo.list({ mode: 'live', app: 'com.example.other', limit: 10 })).toMatchObject([
      { service: 'gms', app: 'com.example.other' },
    ]);
    expect(
      await repo.list({ mode: 'live', since: new Date(now - 3600_000), limit: 10 }),
    ).toHaveLength(3);
    expect(await repo.list({ mode: 'live', limit: 2 })).toHaveLength(2);
  });

  it('age: pruneBatch deletes captures older than the cutoff, in bounded batches', async () => {
    const repo = createCaptureRepository(db.db);
    const old = new Date(Date.now() - 86_400_000);
    for (let i = 0; i < 5; i++) await repo.record(capture({ verifiedAt: old }), TEST_SECRETS, BIG);
    await repo.record(capture(), TEST_SECRETS, BIG);
    const cutoff = new Date(Date.now() - 3600_000);
    expect(await repo.pruneBatch(cutoff, 3, { advisoryLock: true })).toBe(3);
    expect(await repo.pruneBatch(cutoff, 3)).toBe(2);
    expect(await repo.pruneBatch(cutoff, 3)).toBe(0);
    expect(await repo.list({ mode: 'live', limit: 10 })).toHaveLength(1);
  });
});

describe('ATTEST_CAPTURE, ATTEST_CAPTURE_MAX, ATTEST_CAPTURE_RETENTION', () => {
  it('defaults: off, 1000 captures and 64 MiB per mode, 7 days', () => {
    expect(loadConfig({}, {}).capture).toEqual({
      mode: 'off',
      max: { count: 1000, bytes: 64 * 1024 ** 2 },
      retentionSeconds: 7 * 86_400,
    });
  });

  it.each([
    ['500', { count: 500, bytes: 64 * 1024 ** 2 }],
    ['1000/64MiB', { count: 1000, bytes: 64 * 1024 ** 2 }],
    ['20/512KiB', { count: 20, bytes: 512 * 1024 }],
    ['100000/1GiB', { count: 100_000, bytes: 1024 ** 3 }],
    ['10/70000', { count: 10, bytes: 70_000 }],
  ])('ATTEST_CAPTURE_MAX=%s', (text, max) => {
    expect(
      loadConfig({}, { ATTEST_CAPTURE: 'rejected', ATTEST_CAPTURE_MAX: text }).capture,
    ).toMatchObject({
      mode: 'rejected',
      max,
    });
  });

  it.each([['0'], ['100001'], ['10/1KiB'], ['10/2GiB'], ['10/64MB'], ['ten'], ['10/'], ['-1']])(
    'ATTEST_CAPTURE_MAX=%s is one clear line',
    (text) => {
      expect(() => loadConfig({}, { ATTEST_CAPTURE_MAX: text })).toThrow(
        `environment variable ATTEST_CAPTURE_MAX must be COUNT or COUNT/SIZE: COUNT from 1 to 100000 captures, SIZE from 64KiB to 1GiB of tokens (KiB, MiB, GiB, or bytes), such as 1000 or 1000/64MiB, got "${text}"`,
      );
    },
  );

  it('ATTEST_CAPTURE and ATTEST_CAPTURE_RETENTION refuse other values', () => {
    expect(() => loadConfig({}, { ATTEST_CAPTURE: 'on' })).toThrow(
      'environment variable ATTEST_CAPTURE must be off, rejected or all, got "on"',
    );
    expect(loadConfig({}, { ATTEST_CAPTURE_RETENTION: '1h' }).capture?.retentionSeconds).toBe(3600);
    expect(() => loadConfig({}, { ATTEST_CAPTURE_RETENTION: '7' })).toThrow(
      /ATTEST_CAPTURE_RETENTION must be a duration such as 1h, 7d or 30d, got "7"/,
    );
  });
});
