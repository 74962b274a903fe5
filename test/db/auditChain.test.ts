import { randomBytes } from 'node:crypto';
import { cpSync, mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/postgres-js';
import { migrate } from 'drizzle-orm/postgres-js/migrator';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventHash, GENESIS_HASH, parseAnchor } from '../../src/core/auditChain.js';
import { createAuditRepository, recordAudit, type Auditor } from '../../src/db/audit.js';
import { MIGRATIONS_FOLDER } from '../../src/db/migrate.js';
import { localAdmin } from '../../src/cli/admin.js';
import { verifyChain } from '../../src/cli/commands/audit.js';
import { backends, type TestDatabase } from '../support/databases.js';

const auditor: Auditor = { actor: 'alice@ops', log: () => {} };
const noSecrets = () => Promise.reject(new Error('the chain needs no secret'));

/** Values whose RFC 8785 form is easy to get wrong: escapes, non-ASCII, key order, numbers. */
const AWKWARD = {
  zeta: 'tab\there "quoted" back\\slash \u0001\u001f\u007f é 日本 😀 \u2028',
  alpha: [3, -0, 1.5, 1e21, 0.000001, 123456789012, true, false, null, [], {}],
  Beta: { b: 1, a: { '': 'empty name', 'a b': 2 } },
  '10': 'digits sort as text',
};

describe.each(backends())('the audit hash chain on $name', (backend) => {
  /** the file's database; `handle` is whichever database the current test works on */
  let main: TestDatabase;
  let handle: TestDatabase;
  const admin = () => localAdmin(handle, noSecrets, undefined);
  const record = (target: string, after: Record<string, unknown> = { n: 1 }) =>
    recordAudit(handle.db, auditor, { action: 'keys.create', target, after });
  /** plays an attacker with write access to the table (the append-only trigger off) */
  const tamper = async (statement: ReturnType<typeof sql>) => {
    await handle.db.execute(
      sql`alter table audit_events disable trigger audit_events_no_update_delete`,
    );
    try {
      await handle.db.execute(statement);
    } finally {
      await handle.db.execute(
        sql`alter table audit_events enable trigger audit_events_no_update_delete`,
      );
    }
  };

  beforeAll(async () => {
    main = handle = await backend.open();
  }, 120_000);
  afterAll(async () => {
    await main?.close();
  });

  it('chains every event from the stated start, and the database hashes what the verifier recomputes', async () => {
    await record('k1');
    await record('k2', AWKWARD);
    await recordAudit(handle.db, auditor, {
      action: 'keys.revoke',
      target: 'k1',
      before: { n: 1 },
    });
    const chain = await createAuditRepository(handle.db).chain({ afterSeq: 0, limit: 100 });
    expect(chain.map((e) => e.seq)).toEqual([1, 2, 3]);
    expect(chain[0]!.prevHash).toBe(GENESIS_HASH);
    for (const [i, event] of chain.entries()) {
      expect(eventHash(event)).toBe(event.hash);
      if (i > 0) expect(event.prevHash).toBe(chain[i - 1]!.hash);
    }
    expect(chain[1]!.after).toEqual(JSON.parse(JSON.stringify(AWKWARD)));
    expect(chain[0]!.at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    expect(await createAuditRepository(handle.db).head()).toEqual({ seq: 3, hash: chain[2]!.hash });
    expect(await verifyChain(admin(), undefined)).toEqual({
      events: 3,
      head: { seq: 3, hash: chain[2]!.hash },
      broken: null,
    });
    const anchor = parseAnchor(`2:${chain[1]!.hash}`)!;
    expect((await verifyChain(admin(), anchor)).broken).toBeNull();
    expect((await verifyChain(admin(), { seq: 2, hash: chain[0]!.hash })).broken).toMatchObject({
      seq: 2,
      problem: expect.stringContaining("not the anchor's"),
    });
  });

  it('ignores what an insert says for the chain columns and gives a rolled-back place back', async () => {
    const before = await createAuditRepository(handle.db).head();
    await handle.db.execute(sql`
      insert into audit_events (actor, action, target, seq, prev_hash, hash)
      values ('mallory', 'keys.create', 'forged', 999, ${GENESIS_HASH}, ${GENESIS_HASH})`);
    await expect(
      handle.db.transaction(async (tx) => {
        await recordAudit(tx, auditor, { action: 'keys.create', target: 'rolled-back' });
        throw new Error('the change fails after its event was recorded');
      }),
    ).rejects.toThrow('the change fails');
    await record('after-rollback');
    const chain = await createAuditRepository(handle.db).chain({
      afterSeq: before.seq,
      limit: 100,
    });
    expect(chain.map((e) => [e.seq, e.target])).toEqual([
      [before.seq + 1, 'forged'],
      [before.seq + 2, 'after-rollback'],
    ]);
    expect(chain[0]!.prevHash).toBe(before.hash);
    expect((await verifyChain(admin(), undefined)).broken).toBeNull();
  });

  it('keeps one gap-free chain when many changes are recorded at once', async () => {
    const start = (await createAuditRepository(handle.db).head()).seq;
    await Promise.all(Array.from({ length: 24 }, (_, i) => record(`c${i}`)));
    const chain = await createAuditRepository(handle.db).chain({ afterSeq: start, limit: 100 });
    expect(chain.map((e) => e.seq)).toEqual(Array.from({ length: 24 }, (_, i) => start + i + 1));
    expect(new Set(chain.map((e) => e.target)).size).toBe(24);
    expect((await verifyChain(admin(), undefined)).broken).toBeNull();
  });

  describe('names the first broken link', () => {
    // each case tampers with a database of its own: a broken chain stays broken
    let own: TestDatabase;
    const fresh = async () => {
      await own?.close();
      own = await backend.open();
      handle = own;
      for (const target of ['k1', 'k2', 'k3', 'k4']) await record(target);
    };
    afterAll(async () => {
      await own?.close();
      handle = main;
    });

    it('an edited event', async () => {
      await fresh();
      await tamper(sql`update audit_events set actor = 'bob' where seq = 2`);
      expect((await verifyChain(admin(), undefined)).broken).toMatchObject({
        seq: 2,
        problem: expect.stringContaining('it was edited'),
      });
    });

    it('an edited event whose hash was recomputed breaks the next link', async () => {
      await fresh();
      await tamper(sql`update audit_events set actor = 'bob',
        hash = attest_audit_hash(seq, at, 'bob', action, target, before, after, prev_hash) where seq = 2`);
      expect((await verifyChain(admin(), undefined)).broken).toMatchObject({
        seq: 3,
        problem: expect.stringContaining('is not the hash of event 2'),
      });
    });

    it('a deleted event', async () => {
      await fresh();
      await tamper(sql`delete from audit_events where seq = 3`);
      expect((await verifyChain(admin(), undefined)).broken).toMatchObject({
        seq: 3,
        problem: expect.stringContaining('event 3 is missing (deleted)'),
      });
    });

    it('the last event deleted', async () => {
      await fresh();
      await tamper(sql`delete from audit_events where seq = 4`);
      expect((await verifyChain(admin(), undefined)).broken).toMatchObject({
        seq: 4,
        problem: expect.stringContaining('the events after it were deleted'),
      });
    });

    it('two events swapped', async () => {
      await fresh();
      // the unique index on seq wants the swap in three steps
      await tamper(sql`update audit_events set seq = -2 where seq = 2`);
      await tamper(sql`update audit_events set seq = 2 where seq = 3`);
      await tamper(sql`update audit_events set seq = 3 where seq = -2`);
      expect((await verifyChain(admin(), undefined)).broken).toMatchObject({
        seq: 2,
        problem: expect.stringContaining('is not the hash of event 1'),
      });
    });
  });
});

// PostgreSQL (and the embedded engine, the same server) run the migration's SQL alike
describe.skipIf(!process.env.TEST_DATABASE_URL)('the audit chain migration', () => {
  it('chains the events recorded before it, in their order, from 64 zeros', async () => {
    const adminUrl = process.env.TEST_DATABASE_URL!;
    const name = `attest_chain_${randomBytes(6).toString('hex')}`;
    const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
    await admin.unsafe(`create database ${name}`);
    const url = new URL(adminUrl);
    url.pathname = `/${name}`;
    const client = postgres(url.toString(), { max: 1, onnotice: () => {} });
    const folder = mkdtempSync(join(tmpdir(), 'attest-migrations-'));
    try {
      // the migrations up to the one before the chain
      cpSync(MIGRATIONS_FOLDER, folder, { recursive: true });
      const journalFile = join(folder, 'meta', '_journal.json');
      const journal = JSON.parse(readFileSync(journalFile, 'utf8')) as {
        entries: { tag: string }[];
      };
      const at = journal.entries.findIndex((e) => e.tag.endsWith('_audit_chain'));
      expect(at).toBeGreaterThan(0);
      for (const entry of journal.entries.slice(at)) unlinkSync(join(folder, `${entry.tag}.sql`));
      journal.entries = journal.entries.slice(0, at);
      writeFileSync(journalFile, JSON.stringify(journal));
      const db = drizzle(client);
      await migrate(db, { migrationsFolder: folder });
      for (const target of ['old1', 'old2', 'old3'])
        await client`insert into audit_events (actor, action, target, after)
          values ('ops', 'keys.create', ${target}, '{"name":"ci"}'::jsonb)`;
      await migrate(db, { migrationsFolder: MIGRATIONS_FOLDER });
      const chain = await createAuditRepository(db as never).chain({ afterSeq: 0, limit: 10 });
      expect(chain.map((e) => [e.seq, e.target])).toEqual([
        [1, 'old1'],
        [2, 'old2'],
        [3, 'old3'],
      ]);
      expect(chain[0]!.prevHash).toBe(GENESIS_HASH);
      for (const [i, event] of chain.entries()) {
        expect(eventHash(event)).toBe(event.hash);
        if (i > 0) expect(event.prevHash).toBe(chain[i - 1]!.hash);
      }
      expect(await createAuditRepository(db as never).head()).toEqual({
        seq: 3,
        hash: chain[2]!.hash,
      });
      // and the events recorded after it continue the same chain
      await client`insert into audit_events (actor, action, target) values ('ops', 'keys.revoke', 'old1')`;
      const next = await createAuditRepository(db as never).chain({ afterSeq: 3, limit: 10 });
      expect(next[0]).toMatchObject({ seq: 4, prevHash: chain[2]!.hash });
    } finally {
      rmSync(folder, { recursive: true, force: true });
      await client.end();
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end();
    }
  });
});
