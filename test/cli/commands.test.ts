// Builds its data dirs and databases by hand (not from test/support/fixtures.ts): `db migrate` and
// `db status` on an empty data dir or database, and the commands before any migration, are what it tests.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { openDatabase } from '../../src/db/client.js';
import { startServer, type RunningServer } from '../../src/server/start.js';
import { oneLine, runCli } from '../support/cli.js';
import { postgresBackend } from '../support/databases.js';
import { TEST_MASTER_KEY_ENV } from '../support/secrets.js';
import { captureLogger } from '../support/service.js';

const KEY = /^attest_[0-9a-z]{16}[A-Za-z0-9_-]{43}$/;

interface KeyJson {
  id: string;
  name: string;
  key: string;
  createdAt: string;
  expiresAt: string | null;
}

/** the commands every database kind must support, in order (one database per run) */
function commandSuite(where: () => string) {
  it('db migrate applies, then finds nothing to do; db status lists them applied', async () => {
    const first = await runCli('db', 'migrate', '--json');
    expect(first.code).toBe(0);
    expect(JSON.parse(first.stdout)).toEqual({ applied: expect.any(Number), sealed: 0 });
    const again = await runCli('db', 'migrate', '--json');
    expect(JSON.parse(again.stdout)).toEqual({ applied: 0, sealed: 0 });
    const status = await runCli('db', 'status', '--json');
    const list = JSON.parse(status.stdout) as { name: string; applied: boolean }[];
    expect(list.length).toBeGreaterThan(0);
    expect(list.every((m) => m.applied && typeof m.name === 'string')).toBe(true);
    const table = await runCli('db', 'status');
    expect(table.stdout.split('\n')[0]).toMatch(/^MIGRATION\s+APPLIED$/);
    expect(table.stdout).toContain(list[0]!.name);
    expect(where()).toBeTruthy();
  });

  it('keys create --json prints the documented shape, once', async () => {
    const run = await runCli('keys', 'create', '--name', 'mobile banking', '--json');
    expect(run.code, run.stderr).toBe(0);
    // stderr: the change's one log line, which never holds the key
    expect(JSON.parse(oneLine(run))).toMatchObject({
      level: 30,
      audit: { action: 'keys.create', after: { name: 'mobile banking' } },
    });
    const created = JSON.parse(run.stdout) as KeyJson;
    expect(Object.keys(created).sort()).toEqual([
      'apps',
      'createdAt',
      'expiresAt',
      'id',
      'key',
      'mode',
      'name',
      'rejectionDetails',
      'resultTokens',
    ]);
    expect(created.key).toMatch(KEY);
    expect(run.stderr).not.toContain(created.key.slice(-43));
    expect(created.key.slice(7, 23)).toBe(created.id);
    expect(created.name).toBe('mobile banking');
    expect(created.expiresAt).toBeNull();
    expect(Math.abs(Date.parse(created.createdAt) - Date.now())).toBeLessThan(60_000);

    const expiring = JSON.parse(
      (await runCli('keys', 'create', '--name', 'ci', '--expires-in', '90d', '--json')).stdout,
    ) as KeyJson;
    expect(Date.parse(expiring.expiresAt!) - Date.parse(expiring.createdAt)).toBe(90 * 86_400_000);

    const plain = await runCli('keys', 'create', '--name', 'plain');
    expect(plain.code).toBe(0);
    expect(plain.stdout).toMatch(/\n {2}attest_[0-9a-z]{16}[A-Za-z0-9_-]{43}\n/);
  });

  it('keys list (--json) shows state and dates, never a key or its hash; revoke revokes once', async () => {
    const created = JSON.parse(
      (await runCli('keys', 'create', '--name', 'to revoke', '--json')).stdout,
    ) as KeyJson;
    const list = await runCli('keys', 'list', '--json');
    expect(list.code).toBe(0);
    expect(list.stdout).not.toContain(created.key);
    expect(list.stdout).not.toContain(created.key.slice(-43));
    expect(list.stdout).not.toContain('$argon2');
    const rows = JSON.parse(list.stdout) as Record<string, unknown>[];
    const row = rows.find((r) => r.id === created.id)!;
    expect(Object.keys(row).sort()).toEqual([
      'apps',
      'createdAt',
      'expiresAt',
      'id',
      'lastUsedAt',
      'mode',
      'name',
      'rejectionDetails',
      'resultTokens',
      'revokedAt',
      'state',
    ]);
    expect(row).toMatchObject({
      name: 'to revoke',
      state: 'active',
      revokedAt: null,
      lastUsedAt: null,
    });

    const revoke = await runCli('keys', 'revoke', created.id, '--yes', '--json');
    expect(revoke.code).toBe(0);
    expect(JSON.parse(revoke.stdout)).toEqual({
      id: created.id,
      revoked: true,
      alreadyRevoked: false,
    });
    const twice = await runCli('keys', 'revoke', created.id, '--yes', '--json');
    expect(twice.code).toBe(0);
    expect(JSON.parse(twice.stdout)).toEqual({
      id: created.id,
      revoked: true,
      alreadyRevoked: true,
    });
    const after = JSON.parse((await runCli('keys', 'list', '--json')).stdout) as Record<
      string,
      unknown
    >[];
    expect(after.find((r) => r.id === created.id)).toMatchObject({
      state: 'revoked',
      revokedAt: expect.any(String),
    });

    const table = await runCli('keys', 'list');
    expect(table.stdout.split('\n')[0]).toMatch(
      /^ID\s+NAME\s+MODE\s+STATE\s+CREATED\s+LAST USED\s+EXPIRES\s+REVOKED\s+RESULT TOKENS\s+REJECTION DETAILS\s+APPS$/,
    );
    expect(table.stdout).toMatch(new RegExp(`${created.id}\\s+to revoke\\s+live\\s+revoked`));

    const unknown = await runCli('keys', 'revoke', 'nosuchkey0000000', '--yes');
    expect(unknown.code).toBe(1);
    expect(oneLine(unknown)).toMatch(/^attest: no API key with id "nosuchkey0000000"/);
  });

  it('allowlist add apple: receipt, risk and distribution rules are set, kept, shown and cleared', async () => {
    const app = 'ABCDE12345.com.example.rules';
    const set = await runCli(
      'allowlist',
      'add',
      'apple',
      app,
      '--require-receipt',
      '--max-risk-metric',
      '5',
      '--validation-category',
      'appstore,TestFlight',
      '--min-bundle-version',
      '4.2',
      '--allow-missing-validation-category',
    );
    expect(set.code).toBe(0);
    // no DeviceCheck key for the team: the rule can never fire, and the warning says what to add
    expect(set.stderr).toMatch(
      /attest: warning: --max-risk-metric 5 can never fire for ABCDE12345\.com\.example\.rules: .*no DeviceCheck key \(attest apple credentials add ABCDE12345 /,
    );
    expect(set.stdout).toMatch(
      /receipt required, risk <= 5, category appstore\|testflight, bundle >= 4\.2, missing category ok/,
    );
    const kept = JSON.parse((await runCli('allowlist', 'add', 'apple', app, '--json')).stdout);
    expect(kept.policy).toMatchObject({
      requireReceipt: true,
      maxRiskMetric: 5,
      validationCategories: ['appstore', 'testflight'],
      minBundleVersion: '4.2',
      allowMissingValidationCategory: true,
    });
    const cleared = await runCli(
      'allowlist',
      'add',
      'apple',
      app,
      '--no-require-receipt',
      '--no-max-risk-metric',
      '--no-validation-category',
      '--no-min-bundle-version',
      '--json',
    );
    expect(JSON.parse(cleared.stdout).policy).toMatchObject({
      requireReceipt: false,
      maxRiskMetric: null,
      validationCategories: [],
      minBundleVersion: null,
    });
    for (const [flag, value, message] of [
      ['--max-risk-metric', 'lots', /--max-risk-metric must be a whole number/],
      ['--validation-category', 'appstore,sideloaded', /--validation-category takes platform/],
      ['--min-bundle-version', '1.x', /--min-bundle-version must be 1 to 4 dotted numbers/],
    ] as const) {
      const bad = await runCli('allowlist', 'add', 'apple', app, flag, value);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toMatch(message);
    }
    expect((await runCli('allowlist', 'remove', 'apple', app, '--yes')).code).toBe(0);
  });

  it('allowlist add/list/remove apple', async () => {
    const add = await runCli('allowlist', 'add', 'apple', 'ABCDE12345.com.example.bank');
    expect(add.code).toBe(0);
    expect(add.stdout).toMatch(/added apple ABCDE12345\.com\.example\.bank \(env production\)/);
    const update = await runCli(
      'allowlist',
      'add',
      'apple',
      'ABCDE12345.com.example.bank',
      '--env',
      'any',
      '--json',
    );
    expect(JSON.parse(update.stdout)).toMatchObject({
      kind: 'apple',
      appId: 'ABCDE12345.com.example.bank',
      env: 'any',
      result: 'updated',
    });
    await runCli('allowlist', 'add', 'apple', 'ZZZZZ99999.org.beta-app', '--env', 'development');
    const list = JSON.parse((await runCli('allowlist', 'list', '--json')).stdout) as {
      apple: unknown[];
      android: unknown[];
    };
    const noRules = {
      requireReceipt: false,
      maxRiskMetric: null,
      validationCategories: [],
      minBundleVersion: null,
      allowMissingValidationCategory: false,
      observe: [],
      maxVerifiesPerDevice: null,
      platforms: [],
    };
    expect(list.apple).toEqual([
      { ...noRules, appId: 'ABCDE12345.com.example.bank', env: 'any' },
      { ...noRules, appId: 'ZZZZZ99999.org.beta-app', env: 'development' },
    ]);
    expect(list.android).toEqual([]);
    const table = await runCli('allowlist', 'list');
    expect(table.stdout).toMatch(/apple\s+ABCDE12345\.com\.example\.bank\s+env any/);

    const remove = await runCli(
      'allowlist',
      'remove',
      'apple',
      'ZZZZZ99999.org.beta-app',
      '--yes',
      '--json',
    );
    expect(remove.code).toBe(0);
    expect(JSON.parse(remove.stdout)).toEqual({
      kind: 'apple',
      id: 'ZZZZZ99999.org.beta-app',
      removed: true,
    });
    const again = await runCli('allowlist', 'remove', 'apple', 'ZZZZZ99999.org.beta-app', '--yes');
    expect(again.code).toBe(1);
    expect(oneLine(again)).toMatch(/not on the allowlist/);
    const after = JSON.parse((await runCli('allowlist', 'list', '--json')).stdout) as {
      apple: { appId: string }[];
    };
    expect(after.apple.map((a) => a.appId)).toEqual(['ABCDE12345.com.example.bank']);
  });

  it('db prune --json answers a count', async () => {
    const run = await runCli('db', 'prune', '--older-than', '1h', '--json');
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual({ deleted: expect.any(Number) });
  });
}

describe('attest CLI in-process on the embedded database', () => {
  let dir: string;
  let server: RunningServer | undefined;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'attest-cli-'));
    delete process.env.DATABASE_URL;
    process.env.ATTEST_DATA_DIR = join(dir, 'data');
  });
  afterAll(async () => {
    await server?.close();
    rmSync(dir, { recursive: true, force: true });
    delete process.env.ATTEST_DATA_DIR;
  });

  it('before the database exists: commands other than db migrate refuse to create one', async () => {
    for (const args of [
      ['db', 'status'],
      ['keys', 'list'],
    ]) {
      const run = await runCli(...args);
      expect(run.code).toBe(3);
      expect(run.stdout).toBe('');
      expect(oneLine(run)).toMatch(
        /^attest: no attest database in .*data \(the folder ATTEST_DATA_DIR names/,
      );
    }
    expect(existsSync(process.env.ATTEST_DATA_DIR!)).toBe(false);
  });

  it('before any migration: status says not applied, other commands exit 3 and say to migrate', async () => {
    await (await openDatabase({ dataDir: process.env.ATTEST_DATA_DIR!, role: 'cli' })).close();
    const status = await runCli('db', 'status', '--json');
    expect(status.code).toBe(0);
    expect((JSON.parse(status.stdout) as { applied: boolean }[]).every((m) => !m.applied)).toBe(
      true,
    );
    const list = await runCli('keys', 'list');
    expect(list.code).toBe(3);
    expect(list.stdout).toBe('');
    expect(oneLine(list)).toMatch(/run "attest db migrate"/);
  }, 120_000); // creating the embedded database takes a while on a busy machine

  describe('with the data dir opened directly', () => {
    it('db migrate on the embedded database', async () => {
      const run = await runCli('db', 'migrate');
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toMatch(/applied \d+ migration\(s\) to /);
    });
  });

  describe('through a running server’s admin socket', () => {
    beforeAll(async () => {
      const { logger } = captureLogger();
      server = await startServer(loadConfig({ port: 0, host: '127.0.0.1' }), logger, {
        migrate: false,
      });
    });
    commandSuite(() => process.env.ATTEST_DATA_DIR!);

    it('db migrate with a migration pending refuses while the server holds the directory (never another database)', async () => {
      await server!.database.db.execute(
        sql`create table saved_migrations as select * from drizzle.__drizzle_migrations`,
      );
      await server!.database.db.execute(sql`delete from drizzle.__drizzle_migrations`);
      try {
        const run = await runCli('db', 'migrate');
        expect(run.code).toBe(3);
        expect(run.stdout).toBe('');
        expect(oneLine(run)).toMatch(
          /^attest: \d+ migration\(s\) are pending but a running "attest serve" holds .*: stop it/,
        );
      } finally {
        await server!.database.db.execute(
          sql`insert into drizzle.__drizzle_migrations select * from saved_migrations`,
        );
        await server!.database.db.execute(sql`drop table saved_migrations`);
      }
      expect((await runCli('db', 'migrate', '--json')).stdout).toBe(
        '{\n  "applied": 0,\n  "sealed": 0\n}\n',
      );
    });

    it('a database error is exit 3 with one line, without the query or its parameters (the key hash)', async () => {
      await server!.database.db.execute(
        sql`alter table api_keys add constraint test_short_names check (length(name) < 5) not valid`,
      );
      try {
        const run = await runCli('keys', 'create', '--name', 'too long a name');
        expect(run.code).toBe(3);
        const line = oneLine(run);
        expect(line).toMatch(/^attest: unexpected failure: .*test_short_names/);
        expect(line).not.toMatch(/argon2|Failed query|params|insert into/i);
      } finally {
        await server!.database.db.execute(
          sql`alter table api_keys drop constraint test_short_names`,
        );
      }
    });

    it('a key made by the CLI works on the running server at once', async () => {
      const created = JSON.parse(
        (await runCli('keys', 'create', '--name', 'live', '--json')).stdout,
      ) as KeyJson;
      const res = await fetch(`${server!.url}/api/v1/attestation/init`, {
        method: 'POST',
        headers: { 'X-Api-Key': created.key },
      });
      expect(res.status).toBe(200);
    });
  });
});

describe('attest CLI: bad usage and bad input exit 2 with one line on stderr', () => {
  // none of these reaches a database
  it.each([
    [['bogus']],
    [['keys', 'create']],
    [['keys', 'create', '--name', '   ']],
    [['keys', 'create', '--name', 'x'.repeat(101)]],
    [['keys', 'create', '--name', 'x', '--expires-in', '5q']],
    [['keys', 'create', '--name', 'x', '--expires-in', '0d']],
    [['keys', 'create', '--name', 'x', '--expires-in', '999999999w']],
    [['db', 'prune', '--older-than', '999999999w']],
    [['keys', 'create', '--name', 'x', '--bogus']],
    [['keys', 'revoke']],
    [['allowlist', 'add', 'apple', 'abcde12345.com.example']],
    [['allowlist', 'add', 'apple', 'ABCDE12345']],
    [['allowlist', 'add', 'apple', 'ABCDE12345.com.example', '--env', 'staging']],
    [['allowlist', 'add', 'android', 'com.example.app']],
    [['allowlist', 'remove', 'ios', 'x']],
    [['allowlist', 'remove', 'apple', 'ABCDE12345.com.x', '--key-id', 'abc']],
    [['db', 'prune', '--older-than', 'soon']],
    [['serve', '--port', '70000']],
    [['serve', '--port', 'http']],
    [['serve', '--metrics-port', '70000']],
  ])('%j', async (args) => {
    const run = await runCli(...args);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(oneLine(run)).toMatch(/^attest: /);
  });

  it('a bad environment variable is a usage error too', async () => {
    process.env.ATTEST_SESSION_TTL_SECONDS = 'forever';
    try {
      const run = await runCli('keys', 'list');
      expect(run.code).toBe(2);
      expect(oneLine(run)).toBe(
        'attest: environment variable ATTEST_SESSION_TTL_SECONDS must be a whole number of seconds from 1 to 86400, got "forever"; fix it and run again',
      );
    } finally {
      delete process.env.ATTEST_SESSION_TTL_SECONDS;
    }
  });

  it('--help and --version exit 0', async () => {
    const help = await runCli('keys', 'create', '--help');
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/Examples:/);
    expect((await runCli('--version')).code).toBe(0);
  });
});

const pg = postgresBackend();
describe.skipIf(!pg)('attest CLI in-process on PostgreSQL (DATABASE_URL)', () => {
  const adminUrl = process.env.TEST_DATABASE_URL!;
  const name = `attest_test_cli_${randomBytes(5).toString('hex')}`;
  beforeAll(async () => {
    // an empty database, so that `db migrate` has work to do
    const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
    await admin.unsafe(`create database ${name}`);
    await admin.end();
    const url = new URL(adminUrl);
    url.pathname = `/${name}`;
    process.env.DATABASE_URL = url.toString();
    // PostgreSQL has no default master key
    process.env.ATTEST_MASTER_KEY = TEST_MASTER_KEY_ENV;
  });
  afterAll(async () => {
    delete process.env.DATABASE_URL;
    delete process.env.ATTEST_MASTER_KEY;
    const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
    await admin.unsafe(`drop database if exists ${name} with (force)`);
    await admin.end();
  });
  commandSuite(() => process.env.DATABASE_URL!);

  it('an unreachable database is exit 3 with one line naming the place, never the password', async () => {
    const saved = process.env.DATABASE_URL;
    process.env.DATABASE_URL = 'postgres://attest:s3cret@127.0.0.1:1/none';
    try {
      const run = await runCli('keys', 'list');
      expect(run.code).toBe(3);
      const line = oneLine(run);
      expect(line).not.toContain('s3cret');
    } finally {
      process.env.DATABASE_URL = saved;
    }
  });
});
