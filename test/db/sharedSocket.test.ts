/**
 * The embedded database's shared socket: CLI commands talk to the one PGlite session that the
 * running server uses too, and neither may see the other's statements.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSharedSocket, type SharedSocket } from '../../src/db/sharedSocket.js';

describe('shared socket', () => {
  let db: PGlite;
  let socket: SharedSocket;
  let dir: string;
  let path: string;
  const client = () =>
    postgres({ path, username: 'postgres', database: 'postgres', max: 1, onnotice: () => {} });

  beforeAll(async () => {
    db = await PGlite.create();
    dir = mkdtempSync(join(tmpdir(), 'attest-socket-'));
    path = join(dir, '.s.PGSQL.5432');
    socket = await startSharedSocket(db, path, 8);
  });
  afterAll(async () => {
    await socket?.stop();
    await db?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** the server's own parameterised queries, back to back until stopped */
  function busyServer() {
    let stop = false;
    let count = 0;
    const done = (async () => {
      while (!stop) {
        const r = await db.query<{ a: string }>('select $1::text as a, $2::text as b', ['x', 'y']);
        expect(r.rows[0]!.a).toBe('x');
        count++;
        await new Promise((resolve) => setImmediate(resolve));
      }
    })();
    return {
      stop: async () => {
        stop = true;
        await done;
        return count;
      },
    };
  }

  it('a client statement runs whole while the server queries: its own SQL, its own parameters', async () => {
    const sql = client();
    const server = busyServer();
    try {
      for (let n = 0; n < 150; n++) {
        const rows = await sql.unsafe<{ v: number }[]>('select $1::int as v', [n]);
        expect(rows[0]!.v).toBe(n);
      }
    } finally {
      const served = await server.stop();
      await sql.end();
      // the server was not shut out: it kept answering between the client's statements
      expect(served).toBeGreaterThan(0);
    }
  });

  it('a client transaction keeps the session to itself until it commits', async () => {
    const sql = client();
    let outside: Promise<number> | undefined;
    let ranInside = false;
    try {
      await sql.begin(async (t) => {
        await t.unsafe('create table socket_probe (v int)');
        // started inside the client's transaction, the server's query must wait for its commit
        outside = db
          .query<{ c: number }>('select count(*)::int as c from socket_probe')
          .then((r) => ((ranInside = true), r.rows[0]!.c));
        await t.unsafe('insert into socket_probe values ($1)', [1]);
        await new Promise((resolve) => setImmediate(resolve));
        expect(ranInside).toBe(false);
      });
    } finally {
      await sql.end();
    }
    // it ran after the commit: it sees the committed row
    expect(await outside).toBe(1);
  });

  it('a client that leaves inside a transaction is rolled back and frees the session', async () => {
    const sql = client();
    await sql.unsafe('begin');
    await sql.unsafe('create table socket_abandoned (v int)');
    await sql.end({ timeout: 0 });
    const r = await db.query<{ t: string | null }>(
      `select to_regclass('socket_abandoned')::text as t`,
    );
    expect(r.rows[0]!.t).toBeNull();
    expect(db.isInTransaction()).toBe(false);
  });

  it('answers an SSL request "N" and goes on with the startup (psql and libpq ask first)', async () => {
    const conn = connect(path);
    try {
      await new Promise((resolve) => conn.once('connect', resolve));
      const request = Buffer.alloc(8);
      request.writeInt32BE(8, 0);
      request.writeInt32BE(80877103, 4);
      conn.write(request);
      const answer = await new Promise<Buffer>((resolve) => conn.once('data', resolve));
      expect(answer.toString('latin1')).toBe('N');
      // the connection stays open for the startup message
      expect(conn.destroyed).toBe(false);
    } finally {
      conn.destroy();
    }
  });
});
