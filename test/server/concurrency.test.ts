import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/client.js';
import type { DatabaseHandle } from '../../src/db/database.js';
import { migrationStatus, runMigrations } from '../../src/db/migrate.js';
import { backends, postgresBackend, type TestDatabase } from '../support/databases.js';
import { createTestService, init, issueKey, verify } from '../support/service.js';
import { b64, token } from '../support/tokens.js';

describe.each(backends())('one session, 100 parallel verifies, on $name', (backend) => {
  let db: TestDatabase;
  let second: DatabaseHandle | undefined;
  beforeAll(async () => {
    db = await backend.open();
    // on PostgreSQL a second pool plays a second instance behind the load balancer
    if (db.url)
      second = await openDatabase({ url: db.url, dataDir: '', role: 'server', poolSize: 20 });
  });
  afterAll(async () => {
    await second?.close();
    await db?.close();
  });

  it('exactly one request consumes the session, every other one is session_consumed (5 rounds)', async () => {
    const { key } = await issueKey(db);
    const a = createTestService(db);
    const b = second ? createTestService(second) : a;
    for (let round = 0; round < 5; round++) {
      a.logs.clear();
      b.logs.clear();
      const { body } = await init(a.app, key);
      const payload = {
        attestationToken: b64(token(new Uint8Array(Buffer.from(body.serverNonce, 'base64')))),
        sessionReference: body.sessionReference,
      };
      const results = await Promise.all(
        Array.from({ length: 100 }, async (_, i) => {
          const res = await verify((i % 2 ? b : a).app, key, payload);
          expect(res.status).toBe(200);
          return (await res.json()) as { isValid: boolean };
        }),
      );
      expect(results.filter((r) => r.isValid)).toHaveLength(1);
      const reasons = [...a.logs.requests(), ...(b === a ? [] : b.logs.requests())]
        .filter((l) => l.route === '/api/v1/attestation/verify')
        .map((l) => l.reason ?? 'valid');
      expect(reasons).toHaveLength(100);
      expect(reasons.filter((r) => r === 'valid')).toHaveLength(1);
      expect(reasons.filter((r) => r === 'session_consumed')).toHaveLength(99);
    }
  });
});

const pg = postgresBackend();
describe.skipIf(!pg)('concurrent migrations on PostgreSQL', () => {
  const adminUrl = process.env.TEST_DATABASE_URL!;
  let name: string;
  let url: string;
  beforeAll(async () => {
    name = `attest_test_mig_${randomBytes(5).toString('hex')}`;
    const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
    await admin.unsafe(`create database ${name}`);
    await admin.end();
    const u = new URL(adminUrl);
    u.pathname = `/${name}`;
    url = u.toString();
  });
  afterAll(async () => {
    const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
    await admin.unsafe(`drop database if exists ${name} with (force)`);
    await admin.end();
  });

  it('two handles migrating an empty database at once: applied once, both succeed', async () => {
    const handles = await Promise.all(
      [0, 1, 2].map(() => openDatabase({ url, dataDir: '', role: 'cli', poolSize: 2 })),
    );
    try {
      const results = await Promise.all(handles.map((h) => runMigrations(h)));
      const shipped = (await migrationStatus(handles[0]!.db)).length;
      expect(results.map((r) => r.applied).reduce((x, y) => x + y, 0)).toBe(shipped);
      expect(results.filter((r) => r.applied > 0)).toHaveLength(1);
      expect((await migrationStatus(handles[1]!.db)).every((m) => m.applied)).toBe(true);
      const check = postgres(url, { max: 1, onnotice: () => {} });
      const rows = await check`select count(*)::int as n from drizzle.__drizzle_migrations`;
      await check.end();
      expect(rows[0]!.n).toBe(shipped);
    } finally {
      await Promise.all(handles.map((h) => h.close()));
    }
  });
});
