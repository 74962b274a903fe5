import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/client.js';
import { cleanDatabaseError, isConnectionError, unavailable } from '../../src/db/errors.js';

/** the error a real query raises through drizzle against `url` */
async function failureOf(url: string): Promise<unknown> {
  const handle = await openDatabase({
    url,
    dataDir: '',
    role: 'cli',
    poolSize: 1,
    connectTimeoutSeconds: 2,
  });
  try {
    await handle.db.execute(sql`select ${'a secret parameter'}::text as leaked`);
  } catch (err) {
    return err;
  } finally {
    await handle.close().catch(() => {});
  }
  throw new Error(`a query against ${url} succeeded`);
}

describe('cleanDatabaseError', () => {
  it('names a refused connection, never the query or its parameters', async () => {
    const err = await failureOf('postgres://attest@127.0.0.1:1/attest');
    expect(String((err as Error).message)).toContain('a secret parameter'); // drizzle's own message has it
    expect(isConnectionError(err)).toBe(true);
    expect(cleanDatabaseError(err)).toBe('connection refused');
    const line = unavailable('postgres://attest@127.0.0.1:1/attest', err).message;
    expect(line).toBe(
      'cannot reach the database at postgres://attest@127.0.0.1:1/attest: connection refused; check DATABASE_URL and that the server runs',
    );
  });

  it('names an unknown host', async () => {
    const err = await failureOf('postgres://attest@no-such-host.invalid/attest');
    expect(cleanDatabaseError(err)).toBe('unknown host "no-such-host.invalid"');
  });

  it('says when the server accepts only TLS (pg_hba.conf hostssl: SQLSTATE 28000, "no encryption")', () => {
    // the shape postgres-js gives a server's ErrorResponse; no TLS-only server runs in the tests
    const err = Object.assign(
      new Error(
        'no pg_hba.conf entry for host "10.0.0.5", user "attest", database "attest", no encryption',
      ),
      { code: '28000' },
    );
    expect(isConnectionError(err)).toBe(true);
    expect(cleanDatabaseError(err)).toMatch(/^TLS required: .*sslmode=require/);
  });

  it('a statement error is not a connection error, and keeps the driver’s words', () => {
    const err = Object.assign(new Error('relation "nope" does not exist'), { code: '42P01' });
    expect(isConnectionError(err)).toBe(false);
    expect(cleanDatabaseError(new Error('Failed query: select 1', { cause: err }))).toBe(
      'relation "nope" does not exist',
    );
  });
});
