/**
 * The CLI of result tokens on the embedded database, in process: keys create/update/list with
 * --result-tokens (audited), result-keys rotate/list (audited, never key bytes), the
 * configuration's failure paths, and `serve`'s rule about ATTEST_ISSUER.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { JSONWebKeySet } from 'jose';
import { afterAll, afterEach, describe, expect } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { resolveMasterKey } from '../../src/db/masterKey.js';
import { createResultKeyRepository } from '../../src/db/resultKeys.js';
import { createSecretBox } from '../../src/db/secretBox.js';
import { createResultTokenSigner } from '../../src/server/resultTokenSigner.js';
import { startServer } from '../../src/server/start.js';
import { oneLine, runCli } from '../support/cli.js';
import { captureLogger } from '../support/service.js';
import { it } from '../support/fixtures.js';

const ISSUER = 'https://attest.example.com';

describe('result tokens in the CLI (embedded database)', { timeout: 120_000 }, () => {
  let dir: string;
  const saved = { ...process.env };
  it.beforeAll(async ({ cliDataDir, tempDir }) => {
    void cliDataDir;
    dir = tempDir;
    delete process.env.ATTEST_ISSUER;
    delete process.env.ATTEST_RESULT_TOKEN_TTL;
    process.env.ATTEST_ACTOR = 'alice';
  }, 180_000);
  afterEach(() => {
    delete process.env.ATTEST_ISSUER;
    delete process.env.ATTEST_RESULT_TOKEN_TTL;
  });
  afterAll(() => {
    process.env = saved;
  });

  const ok = async (...args: string[]) => {
    const run = await runCli(...args);
    expect(run.code, run.stderr).toBe(0);
    return run;
  };
  const json = async <T>(...args: string[]) => JSON.parse((await ok(...args)).stdout) as T;
  type KeyView = { id: string; name: string; resultTokens: boolean };

  it('keys create --result-tokens: shown in keys list (JSON and table) and in the audit event', async () => {
    const created = await json<KeyView & { key: string }>(
      'keys',
      'create',
      '--name',
      'payments',
      '--result-tokens',
      '--json',
    );
    expect(created.resultTokens).toBe(true);
    const plain = await json<KeyView>('keys', 'create', '--name', 'plain', '--json');
    expect(plain.resultTokens).toBe(false);
    const list = await json<KeyView[]>('keys', 'list', '--json');
    expect(list.map((k) => [k.name, k.resultTokens])).toEqual([
      ['payments', true],
      ['plain', false],
    ]);
    const table = (await ok('keys', 'list')).stdout.split('\n');
    expect(table[0]).toMatch(/RESULT TOKENS\s+REJECTION DETAILS\s+APPS$/);
    expect(table.find((l) => l.startsWith(created.id))).toMatch(/\son\s+off\s+all$/);
    expect(table.find((l) => l.startsWith(plain.id))).toMatch(/\soff\s+off\s+all$/);
    const events = await json<{ action: string; target: string; after: unknown }[]>(
      'audit',
      'list',
      '--action',
      'keys.create',
      '--json',
    );
    expect(events.find((e) => e.target === created.id)?.after).toMatchObject({
      name: 'payments',
      resultTokens: true,
    });
  });

  it('keys update ID --result-tokens on|off changes the key, once, audited', async () => {
    const key = await json<KeyView>('keys', 'create', '--name', 'switch', '--json');
    const on = await ok('keys', 'update', key.id, '--result-tokens', 'on', '--json');
    expect(JSON.parse(on.stdout)).toEqual({ id: key.id, resultTokens: true, changed: true });
    // the change's log line, and the reminder that the server needs an issuer
    expect(on.stderr).toMatch(/"action":"keys.update"/);
    expect(on.stderr).toMatch(/ATTEST_ISSUER is not set here/);
    const again = await ok('keys', 'update', key.id, '--result-tokens', 'on');
    expect(again.stdout).toBe(`result tokens were already on for ${key.id}\n`);
    expect((await ok('keys', 'update', key.id, '--result-tokens', 'off')).stdout).toMatch(
      /^result tokens off for /,
    );
    const events = await json<
      { action: string; target: string; actor: string; before: unknown; after: unknown }[]
    >('audit', 'list', '--action', 'keys.update', '--json');
    expect(events.filter((e) => e.target === key.id)).toMatchObject([
      { actor: 'alice', before: { resultTokens: false }, after: { resultTokens: true } },
      { actor: 'alice', before: { resultTokens: true }, after: { resultTokens: false } },
    ]);
    const listed = (await json<KeyView[]>('keys', 'list', '--json')).find((k) => k.id === key.id);
    expect(listed?.resultTokens).toBe(false);
  });

  it.each([
    [['keys', 'update', '0h3k5x9q2m7c1b4n'], /nothing to change: give --result-tokens on/],
    [
      ['keys', 'update', '0h3k5x9q2m7c1b4n', '--result-tokens', 'yes'],
      /--result-tokens takes on or off, got "yes"/,
    ],
    [['keys', 'update', '0h3k5x9q2m7c1b4n', '--result-tokens'], /argument missing/],
    [['keys', 'update', 'short', '--result-tokens', 'on'], /an API key id is 16 characters/],
    [
      [
        'keys',
        'update',
        'attest_0h3k5x9q2m7c1b4nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA',
        '--result-tokens',
        'on',
      ],
      /that is a whole API key, not its id; its id is 0h3k5x9q2m7c1b4n/,
    ],
    [['keys', 'create', '--name', 'x', '--result-tokens', 'on'], /too many arguments|unknown/],
    [['result-keys', 'rotate', '--now'], /unknown option '--now'/],
    [['result-keys', 'bogus'], /unknown command|too many arguments/],
  ])('bad usage exits 2 with one line: %j', async (args, message) => {
    const run = await runCli(...args);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(oneLine(run)).toMatch(message);
    expect(oneLine(run)).not.toContain('AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA');
  });

  it('keys update of an unknown key is the negative answer (exit 1)', async () => {
    const run = await runCli('keys', 'update', '0000000000000000', '--result-tokens', 'on');
    expect(run.code).toBe(1);
    expect(oneLine(run)).toMatch(/no API key with id "0000000000000000"/);
  });

  it.each([
    ['ATTEST_ISSUER', 'http://attest.example.com', /ATTEST_ISSUER must be an https URL/],
    [
      'ATTEST_ISSUER',
      'https://attest.example.com/',
      /ATTEST_ISSUER must be an https URL .*without .* trailing slash/,
    ],
    ['ATTEST_ISSUER', 'attest.example.com', /ATTEST_ISSUER must be an https URL/],
    ['ATTEST_ISSUER', 'https://attest.example.com?x=1', /ATTEST_ISSUER/],
    [
      'ATTEST_RESULT_TOKEN_TTL',
      '3601',
      /ATTEST_RESULT_TOKEN_TTL must be a lifetime from 1 second to 1 hour/,
    ],
    ['ATTEST_RESULT_TOKEN_TTL', '2h', /ATTEST_RESULT_TOKEN_TTL must be/],
    ['ATTEST_RESULT_TOKEN_TTL', '0', /ATTEST_RESULT_TOKEN_TTL must be/],
    ['ATTEST_RESULT_TOKEN_TTL', '5 minutes', /ATTEST_RESULT_TOKEN_TTL must be/],
  ])('%s=%s is a usage error (exit 2)', async (name, value, message) => {
    process.env[name] = value;
    const run = await runCli('result-keys', 'list');
    expect(run.code).toBe(2);
    expect(oneLine(run)).toMatch(message);
  });

  it('ATTEST_RESULT_TOKEN_TTL takes seconds or a duration up to 1 h; 300 s by default', () => {
    expect(loadConfig({}, {}).resultTokenTtlSeconds).toBe(300);
    expect(loadConfig({}, { ATTEST_RESULT_TOKEN_TTL: '5m' }).resultTokenTtlSeconds).toBe(300);
    expect(loadConfig({}, { ATTEST_RESULT_TOKEN_TTL: '3600' }).resultTokenTtlSeconds).toBe(3600);
    expect(loadConfig({}, { ATTEST_RESULT_TOKEN_TTL: '1h' }).resultTokenTtlSeconds).toBe(3600);
    expect(loadConfig({}, { ATTEST_ISSUER: 'https://a.example/attest' }).issuer).toBe(
      'https://a.example/attest',
    );
  });

  it('serve refuses to start without ATTEST_ISSUER while a key uses result tokens; with it, it publishes a key at once', async () => {
    const { logger } = captureLogger();
    // the "payments" key of the first test has result tokens on
    await expect(
      startServer(loadConfig({ port: 0, host: '127.0.0.1' }), logger, { migrate: false }),
    ).rejects.toThrow(ConfigError);
    await expect(
      startServer(loadConfig({ port: 0, host: '127.0.0.1' }), logger, { migrate: false }),
    ).rejects.toThrow(/need ATTEST_ISSUER/);

    const server = await startServer(
      loadConfig({ port: 0, host: '127.0.0.1' }, { ...process.env, ATTEST_ISSUER: ISSUER }),
      logger,
      { migrate: false },
    );
    try {
      const jwks = (await (
        await fetch(`${server.url}/.well-known/jwks.json`)
      ).json()) as JSONWebKeySet;
      expect(jwks.keys).toHaveLength(1);
      // the CLI reaches the running server's database: the first key is listed, audited as the service's
      const listed = await json<{ kid: string; mode: string; state: string; published: boolean }[]>(
        'result-keys',
        'list',
        '--json',
      );
      // with ATTEST_TEST_KEYS on, serve also made the first test key, published apart
      const testJwks = (await (
        await fetch(`${server.url}/.well-known/jwks-test.json`)
      ).json()) as JSONWebKeySet;
      expect(testJwks.keys).toHaveLength(1);
      expect(listed).toMatchObject([
        { kid: jwks.keys[0]!.kid, mode: 'live', state: 'current', published: true },
        { kid: testJwks.keys[0]!.kid, mode: 'test', state: 'current', published: true },
      ]);
      const created = await json<{ action: string; actor: string; target: string }[]>(
        'audit',
        'list',
        '--action',
        'result_keys',
        '--json',
      );
      expect(created).toMatchObject([
        { action: 'result_keys.create', actor: 'attest serve', target: jwks.keys[0]!.kid },
        { action: 'result_keys.create', actor: 'attest serve', target: testJwks.keys[0]!.kid },
      ]);

      // rotate: published at once (pending), the old key current until the new one signs
      const rotate = await ok('result-keys', 'rotate', '--json');
      const view = JSON.parse(rotate.stdout) as { kid: string; state: string; signingFrom: string };
      expect(view.state).toBe('pending');
      expect(Date.parse(view.signingFrom) - Date.now()).toBeGreaterThan(3000);
      expect(rotate.stderr).toMatch(/"action":"result_keys.rotate"/);
      for (const text of [rotate.stdout, rotate.stderr])
        expect(text).not.toMatch(/"d"|PRIVATE|"x"/);
      const after = await json<{ kid: string; state: string; retiredAt: string | null }[]>(
        'result-keys',
        'list',
        '--json',
      );
      expect(after.map((k) => [k.kid, k.state])).toEqual([
        [jwks.keys[0]!.kid, 'current'],
        [view.kid, 'pending'],
        // the test key is not retired by a live rotation
        [testJwks.keys[0]!.kid, 'current'],
      ]);
      expect(after[0]!.retiredAt).toBe(view.signingFrom);
      const table = (await ok('result-keys', 'list')).stdout;
      expect(table.split('\n')[0]).toMatch(
        /^KID\s+MODE\s+STATE\s+PUBLISHED\s+CREATED\s+SIGNS FROM\s+RETIRED\s+PUBLISHED UNTIL$/,
      );
      expect(table).toContain(view.kid);

      const payments = (await json<KeyView[]>('keys', 'list', '--json')).find(
        (k) => k.name === 'payments',
      )!;
      // the running instance keeps signing with the current key; it reads the new one within 5 s
      // (test/server/resultKeyRotation.test.ts follows that through)
      const set = (await (
        await fetch(`${server.url}/.well-known/jwks.json`)
      ).json()) as JSONWebKeySet;
      expect(set.keys.map((k) => k.kid)).toContain(jwks.keys[0]!.kid);

      // verify-file checks a token of the deployment against the database's keys
      const { key: masterKey } = await resolveMasterKey(loadConfig(), server.database);
      const signer = createResultTokenSigner({
        keys: createResultKeyRepository(server.database.db, createSecretBox([masterKey])),
        issuer: ISSUER,
        ttlSeconds: 300,
        refreshMs: 5000,
      });
      const jwt = await signer.sign({
        apiKeyId: payments.id,
        approach: 'sessionless',
        nonce: new Uint8Array(32),
        details: {
          service: 'apple',
          appleTokenDetails: {
            keyIdentifier: 'AAAA',
            appId: 'ABCDE12345.com.example',
            environment: 'Production',
            assertionCounter: 3,
            platform: 'iOS' as const,
          },
        },
      });
      const path = join(dir, 'result.jwt');
      writeFileSync(path, jwt);
      process.env.ATTEST_ISSUER = ISSUER;
      const checked = await runCli('verify-file', path, '--audience', payments.id, '--json');
      expect(checked.code, checked.stderr).toBe(0);
      expect(JSON.parse(checked.stdout)).toMatchObject({
        valid: true,
        keys: 'database',
        keyPublished: true,
        claims: { iss: ISSUER, aud: payments.id, sub: 'AAAA' },
      });
      const late = await runCli(
        'verify-file',
        path,
        '--at',
        new Date(Date.now() + 3_600_000).toISOString(),
      );
      expect(late.code).toBe(1);
      expect(late.stdout).toMatch(/\[FAIL\] expiry: expired at/);
    } finally {
      await server.close();
    }
  });
});
