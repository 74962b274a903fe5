import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postgresBackend, type TestDatabase } from '../support/databases.js';

const pg = postgresBackend();

describe.skipIf(!pg)('replacing the pool with statements in flight (PostgreSQL)', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await pg!.open();
  });
  afterAll(async () => {
    await db?.close();
  });

  // postgres.js rejects its own start-up query (the array types) unhandled when a connection is
  // destroyed while it starts, which ended the process (3 of 3 runs under a flood at 64 clients)
  it('every in-flight statement fails with a connection error, and the process lives on', async () => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', join(__dirname, '../support/recycleUnderLoad.ts'), db.url!, '6'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr += c));
    const code = await new Promise((resolve) => child.once('exit', resolve));
    expect(code, stderr).toBe(0);
    const report = JSON.parse(stdout) as { rejected: number; notConnection: number };
    expect(report.rejected).toBeGreaterThan(0); // the recycles did hit statements in flight
    expect(report.notConnection).toBe(0);
  }, 60_000);
});
