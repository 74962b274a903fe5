/** The shared fixtures (fixtures.ts): what a test asks for is made, pointed at, and put back. */
import { existsSync } from 'node:fs';
import { describe, expect } from 'vitest';
import { DATABASE_VARIABLES, it, setEnv } from './fixtures.js';
import { runCli } from './cli.js';
import { TEST_MASTER_KEY_ENV } from './secrets.js';

it.override('dataDirEnv', { ATTEST_MASTER_KEY: TEST_MASTER_KEY_ENV });

describe('setEnv', () => {
  it('puts back the values it changed, removing those that were unset', () => {
    process.env.ATTEST_FIXTURE_KEPT = 'before';
    delete process.env.ATTEST_FIXTURE_NEW;
    const restore = setEnv({ ATTEST_FIXTURE_KEPT: 'during', ATTEST_FIXTURE_NEW: 'during' });
    expect(process.env.ATTEST_FIXTURE_KEPT).toBe('during');
    expect(process.env.ATTEST_FIXTURE_NEW).toBe('during');
    restore();
    expect(process.env.ATTEST_FIXTURE_KEPT).toBe('before');
    expect('ATTEST_FIXTURE_NEW' in process.env).toBe(false);
    delete process.env.ATTEST_FIXTURE_KEPT;
  });
});

describe('dataDir and cliDataDir', { timeout: 120_000 }, () => {
  it('a migrated data dir leaves process.env as it was', async ({ dataDir }) => {
    expect(existsSync(dataDir.path)).toBe(true);
    expect(dataDir.env).toEqual({
      ATTEST_DATA_DIR: dataDir.path,
      ATTEST_MASTER_KEY: TEST_MASTER_KEY_ENV,
    });
    expect(process.env.ATTEST_DATA_DIR).not.toBe(dataDir.path);
  });

  it('cliDataDir points the CLI at it: migrated, nothing pending', async ({ cliDataDir }) => {
    expect(process.env.ATTEST_DATA_DIR).toBe(cliDataDir.path);
    expect(process.env.ATTEST_MASTER_KEY).toBe(TEST_MASTER_KEY_ENV);
    for (const name of DATABASE_VARIABLES.filter((v) => !(v in cliDataDir.env)))
      expect(process.env[name]).toBeUndefined();
    const run = await runCli('db', 'migrate', '--json');
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ applied: 0 });
  });
});

describe('an allowlisted app and an API key', { timeout: 120_000 }, () => {
  it('are in the CLI database', async ({ allowlistedApp, apiKey }) => {
    const list = JSON.parse((await runCli('allowlist', 'list', '--json')).stdout) as {
      apple: { appId: string }[];
    };
    expect(list.apple.map((a) => a.appId)).toContain(allowlistedApp.appId);
    const keys = JSON.parse((await runCli('keys', 'list', '--json')).stdout) as { id: string }[];
    expect(keys.map((k) => k.id)).toContain(apiKey.id);
    expect(apiKey.key).toMatch(/^attest_/);
  });

  it('the app is taken off the allowlist after the test that asked for it', async ({
    cliDatabase,
  }) => {
    void cliDatabase;
    const list = JSON.parse((await runCli('allowlist', 'list', '--json')).stdout) as {
      apple: { appId: string }[];
    };
    expect(list.apple).toEqual([]);
  });
});

describe('fakeGoogle', () => {
  it('answers a token it issued', async ({ fakeGoogle }) => {
    expect(fakeGoogle.env.ATTEST_GOOGLE_OAUTH_URL).toBe(fakeGoogle.fake.oauthUrl);
    expect(existsSync(fakeGoogle.serviceAccountFile)).toBe(true);
    const token = fakeGoogle.fake.issue('com.example.app', { ok: true });
    expect(token).toMatch(/^fake-standard-/);
  });
});
