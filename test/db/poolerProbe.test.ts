/**
 * How a server process plans its connections (ATTEST_CHANGE_FEED): without a pooler `auto` keeps
 * NOTIFY, prepared statements and statement_timeout; `poll` runs the pool as behind a pooler in
 * transaction mode (unnamed statements, one in flight per connection, transactions on a reserved
 * connection), which must still commit, roll back and run many statements at once; a server the
 * probe cannot reach fails the open at once, and one that refuses LISTEN is polled. Behind a real
 * PgBouncer: test/server/pooler.test.ts.
 */
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { openDatabase } from '../../src/db/client.js';
import { rowsOf, type DatabaseHandle } from '../../src/db/database.js';
import { planConnections } from '../../src/db/poolerProbe.js';
import { backends, clientOf, type TestDatabase } from '../support/databases.js';

describe.each(backends())('connection plans on $name', (backend) => {
  let db: TestDatabase;
  let polled: DatabaseHandle;
  beforeAll(async () => {
    db = await backend.open();
    polled = await openDatabase({ url: db.url, dataDir: '', role: 'server', changeFeed: 'poll' });
  });
  afterAll(async () => {
    await polled?.close();
    await db?.close();
  });

  const connect = () => (options: object) => clientOf(db.url, options);

  it('auto without a pooler: NOTIFY comes back, statements are prepared, statement_timeout is sent', async () => {
    const plan = await planConnections(connect(), 'auto');
    expect(plan).toEqual({
      feed: 'notify',
      why: 'a NOTIFY reached a LISTEN on another connection',
      startupTimeout: true,
      transactionPooled: false,
    });
    const opened = await openDatabase({
      url: db.url,
      dataDir: '',
      role: 'server',
      changeFeed: 'auto',
    });
    try {
      expect(opened.connections).toEqual(plan);
      const rows = rowsOf<{ t: string }>(
        await opened.db.execute(sql`select current_setting('statement_timeout') as t`),
      );
      expect(rows[0]!.t).toBe('5s');
    } finally {
      await opened.close();
    }
  });

  it('poll is taken as said, without the NOTIFY round trip', async () => {
    expect(polled.connections).toEqual({
      feed: 'poll',
      why: 'ATTEST_CHANGE_FEED=poll',
      startupTimeout: true,
      transactionPooled: true,
    });
  });

  it('a transaction-pooled pool commits, rolls back, and runs 50 statements at once', async () => {
    await polled.db.transaction(async (tx) => {
      await tx.execute(
        sql`insert into apple_apps (app_id, env) values ('ABCDE12345.com.example.tx', 'any')`,
      );
    });
    await expect(
      polled.db.transaction(async (tx) => {
        await tx.execute(
          sql`insert into apple_apps (app_id, env) values ('ABCDE12345.com.example.undone', 'any')`,
        );
        throw new Error('changed my mind');
      }),
    ).rejects.toThrow('changed my mind');
    const apps = rowsOf<{ app_id: string }>(
      await polled.db.execute(
        sql`select app_id from apple_apps where app_id like '%.tx' or app_id like '%.undone'`,
      ),
    );
    expect(apps.map((r) => r.app_id)).toEqual(['ABCDE12345.com.example.tx']);
    const answers = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        polled.db.execute(sql`select ${i}::int as i, pg_backend_pid() as pid`),
      ),
    );
    expect(answers.map((r) => rowsOf<{ i: number }>(r)[0]!.i)).toEqual(
      Array.from({ length: 50 }, (_, i) => i),
    );
  });

  it('a server that cannot be reached is the error at once; a LISTEN the server refuses means polling', async () => {
    const nowhere = (options: object) =>
      clientOf('postgres://postgres@127.0.0.1:1/none', { ...options, connect_timeout: 1 });
    await expect(planConnections(nowhere, 'auto')).rejects.toMatchObject({
      code: 'ECONNREFUSED',
    });
    // so a server that opens with a feed setting fails its open there, within one connect
    // timeout; without one (tests, tools) the pool still opens lazily
    const where = {
      url: 'postgres://postgres@127.0.0.1:1/none',
      dataDir: '',
      role: 'server' as const,
    };
    await expect(openDatabase({ ...where, changeFeed: 'auto' })).rejects.toMatchObject({
      code: 'ECONNREFUSED',
    });
    const lazy = await openDatabase(where);
    expect(lazy.connections?.why).toBe('not probed');
    await lazy.close();
    // as CockroachDB answers LISTEN: an error of the server, on a connection that works
    const noListen = (options: object) => {
      const client = clientOf(db.url, options);
      return new Proxy(client, {
        get: (target, key) =>
          key === 'listen'
            ? () => Promise.reject(new Error('unimplemented: LISTEN'))
            : Reflect.get(target, key),
      });
    };
    const plan = await planConnections(noListen, 'auto');
    expect(plan).toMatchObject({ feed: 'poll', transactionPooled: true, startupTimeout: true });
    expect(plan.why).toMatch(/or the server has no LISTEN/);
  });
});

describe('ATTEST_CHANGE_FEED', () => {
  it('is auto unless set; notify and poll are taken; anything else is one line naming the choices', () => {
    expect(loadConfig({}, {}).changeFeed).toBe('auto');
    expect(loadConfig({}, { ATTEST_CHANGE_FEED: 'poll' }).changeFeed).toBe('poll');
    expect(loadConfig({}, { ATTEST_CHANGE_FEED: 'notify' }).changeFeed).toBe('notify');
    expect(() => loadConfig({}, { ATTEST_CHANGE_FEED: 'sometimes' })).toThrow(ConfigError);
    expect(() => loadConfig({}, { ATTEST_CHANGE_FEED: 'sometimes' })).toThrow(
      'environment variable ATTEST_CHANGE_FEED must be notify, poll or auto, got "sometimes"',
    );
  });
});
