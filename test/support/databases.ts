import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { sql } from 'drizzle-orm';
import postgres from 'postgres';
import { afterAll, beforeAll, beforeEach, inject } from 'vitest';
import { openDatabase, openMemoryDatabase, type DatabaseHandle } from '../../src/db/client.js';
import { runMigrations } from '../../src/db/migrate.js';

export interface Backend {
  name: 'pglite' | 'postgres';
  /** a fresh, migrated, private database */
  open(): Promise<TestDatabase>;
}

export interface TestDatabase extends DatabaseHandle {
  /** the connection URL (PostgreSQL only), for tests that start their own clients */
  url?: string;
  /** empties every table (between tests; a database is shared across a file) */
  reset(): Promise<void>;
}

const TABLES =
  'api_keys, attestation_sessions, apple_apps, android_packages, android_key_pairs, apple_keys, dev_ca, master_key_check, api_key_origins, result_signing_keys, apple_credentials, android_keys, android_revocations, consumed_results, verification_stats, verification_stats_batches, device_velocity, android_key_assertions';

/** PGlite always; PostgreSQL too when TEST_DATABASE_URL is set (each file gets its own database). */
export function backends(): Backend[] {
  const list: Backend[] = [{ name: 'pglite', open: openPglite }];
  if (process.env.TEST_DATABASE_URL)
    list.push({ name: 'postgres', open: () => openPostgres(process.env.TEST_DATABASE_URL!) });
  return list;
}

/** PostgreSQL only (concurrency tests); undefined when TEST_DATABASE_URL is unset. */
export function postgresBackend(): Backend | undefined {
  return backends().find((b) => b.name === 'postgres');
}

/**
 * The file's one database on `backend`: opened before the first test, emptied before each test,
 * closed after the last. Usable inside tests and hooks registered after this call.
 */
export function useDatabase(backend: Backend): TestDatabase {
  let opened: TestDatabase | undefined;
  beforeAll(async () => {
    opened = await backend.open();
  });
  afterAll(async () => {
    await opened?.close();
  });
  beforeEach(async () => {
    await opened!.reset();
  });
  return new Proxy({} as TestDatabase, {
    get(_, key) {
      if (!opened)
        throw new Error('the test database is opened in beforeAll: use it inside tests and hooks');
      return Reflect.get(opened, key);
    },
  });
}

let template: Blob | undefined;

async function openPglite(): Promise<TestDatabase> {
  // the migrated cluster made once per run by test/support/pgliteTemplate.ts
  template ??= new Blob([readFileSync(inject('pgliteTemplate'))]);
  const handle = await openMemoryDatabase(template);
  await runMigrations(handle); // nothing to apply: proves the template is current
  return withReset(handle);
}

async function openPostgres(adminUrl: string): Promise<TestDatabase> {
  const name = `attest_test_${randomBytes(6).toString('hex')}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const handle = await openDatabase({
    url: url.toString(),
    dataDir: '',
    role: 'server',
    poolSize: 20,
  });
  await runMigrations(handle);
  const db = withReset(handle);
  return {
    ...db,
    url: url.toString(),
    async close() {
      await handle.close();
      const cleanup = postgres(adminUrl, { max: 1, onnotice: () => {} });
      await cleanup.unsafe(`drop database if exists ${name} with (force)`);
      await cleanup.end();
    },
  };
}

function withReset(handle: DatabaseHandle): TestDatabase {
  return {
    ...handle,
    close: () => handle.close(),
    reset: async () => {
      await handle.db.execute(sql.raw(`truncate ${TABLES} cascade`));
    },
  };
}
