import { randomBytes } from 'node:crypto';
import postgres, { type Sql } from 'postgres';
import { postgresTarget } from '../../src/db/postgresUrl.js';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, inject } from 'vitest';
import { openDatabase } from '../../src/db/client.js';
import type { DatabaseHandle } from '../../src/db/database.js';
import { runMigrations } from '../../src/db/migrate.js';
import { adminClient, databaseUrl, TEMPLATE_DATABASE } from './embeddedServer.js';

export interface Backend {
  name: 'embedded' | 'postgres';
  /** a fresh, migrated, private database */
  open(): Promise<TestDatabase>;
}

export interface TestDatabase extends DatabaseHandle {
  /** the connection URL, for tests that start their own clients */
  url: string;
  /** empties every table (between tests; a database is shared across a file) */
  reset(): Promise<void>;
}

const TABLES =
  'api_keys, attestation_sessions, apple_apps, android_packages, android_key_pairs, apple_keys, dev_ca, master_key_check, api_key_origins, result_signing_keys, apple_credentials, android_keys, android_revocations, consumed_results, verification_stats, verification_stats_batches, device_velocity, android_key_assertions, verification_devices, android_issuer_velocity, android_issuer_blocks, token_captures';

/**
 * The embedded engine always (the run's one server, test/support/embeddedServer.ts); PostgreSQL
 * too when TEST_DATABASE_URL is set. Each file gets its own database on each.
 */
export function backends(): Backend[] {
  const list: Backend[] = [{ name: 'embedded', open: openEmbedded }];
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

async function openEmbedded(): Promise<TestDatabase> {
  // a copy of the run's migrated template: the migrations run once per run
  return await openOn(inject('embeddedUrl'), TEMPLATE_DATABASE);
}

async function openPostgres(adminUrl: string): Promise<TestDatabase> {
  return await openOn(adminUrl);
}

async function openOn(adminUrl: string, template?: string): Promise<TestDatabase> {
  const name = `attest_test_${randomBytes(6).toString('hex')}`;
  const admin = adminClient(adminUrl);
  await admin.unsafe(`create database ${name}${template ? ` template ${template}` : ''}`);
  await admin.end();
  const url = databaseUrl(adminUrl, name);
  const handle = await openDatabase({ url, dataDir: '', role: 'server', poolSize: 20 });
  await runMigrations(handle); // on a template: nothing to apply, which proves it current
  const db = withReset(handle);
  return {
    ...db,
    url,
    async close() {
      await handle.close();
      const cleanup = adminClient(adminUrl);
      await cleanup.unsafe(`drop database if exists ${name} with (force)`);
      await cleanup.end();
    },
  };
}

function withReset(handle: DatabaseHandle): TestDatabase {
  return {
    ...handle,
    url: handle.url!,
    close: () => handle.close(),
    reset: async () => {
      await handle.db.execute(sql.raw(`truncate ${TABLES} cascade`));
    },
  };
}

/** A postgres.js client of `url` (the embedded server's socket URL included: see postgresUrl.ts). */
export function clientOf(url: string, options: postgres.Options<Record<string, never>> = {}): Sql {
  const target = postgresTarget(url);
  return postgres(target.url, {
    ...target.options,
    onnotice: () => {},
    ...options,
  }) as unknown as Sql;
}
