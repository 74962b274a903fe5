/**
 * The suite's shared fixtures (vitest `test.extend`): a test or a hook names what it needs and gets
 * it made, once per file for what is slow to make (a migrated database), once per test for what is
 * cheap (a fake Google), and taken down after. Nothing is made that no test asked for.
 *
 * - `tempDir`: a private temporary folder, removed after the file.
 * - `dataDir`: a migrated embedded data dir (`attest db migrate` in this process), with the
 *   variables that point attest at it; process.env is as it was before and after.
 * - `postgresDatabase`: a fresh migrated database on TEST_DATABASE_URL, or undefined without one.
 * - `database`: where a CLI test finds its database: PostgreSQL when there is one (faster to
 *   open), else a data dir.
 * - `cliDataDir`, `cliPostgres`, `cliDatabase`: the same, and this process's environment points the CLI at it
 *   until the file ends (the variables it changed are put back: files in the shared project share
 *   one process).
 * - `apiKey`, `allowlistedApp`: a live API key and an allowlisted App Attest app in `cliDatabase`.
 * - `fakeGoogle`: the local Google (fakeGoogle.ts) with one service account, per test.
 *
 * `dataDirEnv` (an option, default none) adds variables to the data dir's, migration included:
 * `it.override('dataDirEnv', { ATTEST_MASTER_KEY: ... })` at the top of a file.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'vitest';
import { runCli } from './cli.js';
import { postgresBackend, type TestDatabase } from './databases.js';
import {
  createTestServiceAccount,
  startFakeGoogle,
  type FakeGoogle,
  type TestServiceAccount,
} from './fakeGoogle.js';
import { TEST_MASTER_KEY_ENV } from './secrets.js';

/** The variables that name where attest finds its database. */
export const DATABASE_VARIABLES = ['ATTEST_DATA_DIR', 'DATABASE_URL'] as const;

export interface MigratedDataDir {
  name: 'embedded';
  /** the data dir (inside `tempDir`; it exists once migrated) */
  path: string;
  /** ATTEST_DATA_DIR and the `dataDirEnv` variables */
  env: Record<string, string>;
}

export interface MigratedPostgres extends TestDatabase {
  name: 'postgres';
  /** DATABASE_URL and ATTEST_MASTER_KEY (PostgreSQL has no default master key) */
  env: Record<string, string>;
}

export type MigratedDatabase = MigratedDataDir | MigratedPostgres;

export interface GoogleFixture {
  fake: FakeGoogle;
  serviceAccount: TestServiceAccount;
  /** the service account's key file (in `tempDir`) */
  serviceAccountFile: string;
  /** ATTEST_GOOGLE_OAUTH_URL and ATTEST_GOOGLE_PLAY_INTEGRITY_URL pointing at the fake */
  env: Record<string, string>;
}

export interface AllowlistedApp {
  /** an App Attest app id, allowlisted in `cliDatabase` */
  appId: string;
}

export interface ApiKey {
  id: string;
  /** the secret, as `keys create` shows it once */
  key: string;
}

/**
 * Sets `vars` in process.env (undefined removes one) and returns what puts back the values they
 * had, and only those.
 */
export function setEnv(vars: Record<string, string | undefined>): () => void {
  const before = Object.fromEntries(Object.keys(vars).map((name) => [name, process.env[name]]));
  for (const [name, value] of Object.entries(vars)) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
  return () => {
    for (const [name, value] of Object.entries(before)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  };
}

/** `env` as the one database the CLI sees: the other database variable is removed. */
function pointAt(env: Record<string, string>): Record<string, string | undefined> {
  return {
    ...Object.fromEntries(DATABASE_VARIABLES.map((name) => [name, undefined])),
    ...env,
  };
}

async function migrateDataDir(
  tempDir: string,
  extra: Record<string, string>,
): Promise<MigratedDataDir> {
  const path = mkdtempSync(join(tempDir, 'data-'));
  rmSync(path, { recursive: true }); // attest makes the data dir itself, private
  const env = { ATTEST_DATA_DIR: path, ...extra };
  const restore = setEnv(pointAt(env));
  try {
    const run = await runCli('db', 'migrate');
    if (run.code !== 0) throw new Error(`attest db migrate exited ${run.code}: ${run.stderr}`);
  } finally {
    restore();
  }
  return { name: 'embedded', path, env };
}

async function openPostgres(): Promise<MigratedPostgres | undefined> {
  const db = await postgresBackend()?.open();
  if (!db) return undefined;
  return Object.assign(db, {
    name: 'postgres' as const,
    env: { DATABASE_URL: db.url, ATTEST_MASTER_KEY: TEST_MASTER_KEY_ENV },
  });
}

export const it = test
  .extend('dataDirEnv', { scope: 'file' }, {} as Record<string, string>)
  .extend('tempDir', { scope: 'file' }, async ({}, { onCleanup }) => {
    const dir = mkdtempSync(join(tmpdir(), 'attest-test-'));
    onCleanup(() => rmSync(dir, { recursive: true, force: true }));
    return dir;
  })
  .extend('dataDir', { scope: 'file' }, async ({ tempDir, dataDirEnv }) =>
    migrateDataDir(tempDir, dataDirEnv),
  )
  .extend('postgresDatabase', { scope: 'file' }, async ({}, { onCleanup }) => {
    const db = await openPostgres();
    onCleanup(async () => await db?.close());
    return db;
  })
  .extend(
    'database',
    { scope: 'file' },
    async ({ tempDir, dataDirEnv }, { onCleanup }): Promise<MigratedDatabase> => {
      const db = await openPostgres();
      if (!db) return await migrateDataDir(tempDir, dataDirEnv);
      onCleanup(async () => await db.close());
      return db;
    },
  )
  .extend('cliDataDir', { scope: 'file' }, async ({ dataDir }, { onCleanup }) => {
    onCleanup(setEnv(pointAt(dataDir.env)));
    return dataDir;
  })
  .extend('cliDatabase', { scope: 'file' }, async ({ database }, { onCleanup }) => {
    onCleanup(setEnv(pointAt(database.env)));
    return database;
  })
  .extend('cliPostgres', { scope: 'file' }, async ({ postgresDatabase }, { onCleanup }) => {
    if (!postgresDatabase)
      throw new Error('cliPostgres needs TEST_DATABASE_URL: skip the suite without it');
    onCleanup(setEnv(pointAt(postgresDatabase.env)));
    return postgresDatabase;
  })
  .extend('apiKey', async ({ cliDatabase }): Promise<ApiKey> => {
    void cliDatabase;
    const run = await runCli('keys', 'create', '--name', 'fixture', '--json');
    if (run.code !== 0) throw new Error(`attest keys create exited ${run.code}: ${run.stderr}`);
    return JSON.parse(run.stdout) as ApiKey;
  })
  .extend('allowlistedApp', async ({ cliDatabase }, { onCleanup }): Promise<AllowlistedApp> => {
    void cliDatabase;
    const appId = 'ABCDE12345.com.example.fixture';
    const run = await runCli('allowlist', 'add', 'apple', appId);
    if (run.code !== 0) throw new Error(`attest allowlist add exited ${run.code}: ${run.stderr}`);
    onCleanup(async () => {
      const removed = await runCli('allowlist', 'remove', 'apple', appId, '--yes');
      if (removed.code !== 0) throw new Error(`attest allowlist remove: ${removed.stderr}`);
    });
    return { appId };
  })
  .extend('fakeGoogle', async ({ tempDir }, { onCleanup }): Promise<GoogleFixture> => {
    const serviceAccount = createTestServiceAccount();
    const serviceAccountFile = join(mkdtempSync(join(tempDir, 'google-')), 'sa.json');
    writeFileSync(serviceAccountFile, serviceAccount.json);
    const fake = await startFakeGoogle({ accounts: [serviceAccount] });
    onCleanup(() => fake.close());
    return {
      fake,
      serviceAccount,
      serviceAccountFile,
      env: {
        ATTEST_GOOGLE_OAUTH_URL: fake.oauthUrl,
        ATTEST_GOOGLE_PLAY_INTEGRITY_URL: fake.playIntegrityUrl,
      },
    };
  });

export { it as test };
