/**
 * App-scoped API keys in the CLI: `keys create --apps`, `keys update --apps|--all-apps`, `keys
 * list` (text and JSON), their audit events and deny paths, on the embedded database and on
 * PostgreSQL; then through a running server's admin socket, where a scope change applies to the
 * next verify at once, and `verify-file --key-apps` explains the refusal.
 */
import { createHash, randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createDevCa, createSimulatedKey, mintAttestation } from '../../src/core/dev/devCa.js';
import { encodeAppleToken } from '../../src/core/apple/appleToken.js';
import { createDevCaRepository } from '../../src/db/devCa.js';
import { startServer } from '../../src/server/start.js';
import { oneLine, runCli } from '../support/cli.js';
import { postgresBackend } from '../support/databases.js';
import { TEST_MASTER_KEY_ENV, TEST_SECRETS } from '../support/secrets.js';
import { captureLogger } from '../support/service.js';
import { it } from '../support/fixtures.js';

it.override('dataDirEnv', { ATTEST_MASTER_KEY: TEST_MASTER_KEY_ENV });

const APP_A = 'ABCDE12345.com.example.a';
const APP_B = 'ABCDE12345.com.example.b';
const PKG = 'com.example.bank';

type KeyView = { id: string; name: string; apps: string[] | null; key?: string };
type AuditView = { action: string; target: string; actor: string; before: unknown; after: unknown };

const ok = async (...args: string[]) => {
  const run = await runCli(...args);
  expect(run.code, run.stderr).toBe(0);
  return run;
};
const json = async <T>(...args: string[]) => JSON.parse((await ok(...args)).stdout) as T;

/** The commands and their deny paths, on whichever database the environment names. */
function scopeSuite() {
  it('keys create --apps: stored sorted without repeats, listed (JSON and table), audited', async () => {
    const scoped = await json<KeyView>(
      'keys',
      'create',
      '--name',
      'bank backends',
      '--apps',
      ` ${PKG}, ${APP_A},${PKG}`,
      '--json',
    );
    expect(scoped.apps).toEqual([APP_A, PKG]);
    expect(scoped.key).toMatch(/^attest_/);
    const text = await ok('keys', 'create', '--name', 'text', '--apps', APP_B);
    expect(text.stdout).toContain(`It verifies tokens of ${APP_B} only.`);
    // allowed before the app is allowlisted, with a warning that catches a misspelt ID
    // (the audit event's log line follows it on stderr)
    expect(text.stderr.split('\n')[0]).toBe(
      `attest: warning: ${APP_B} is not allowlisted (yet?): the key verifies no token of it until it is; check the spelling with "attest allowlist list"`,
    );
    const plain = await json<KeyView>('keys', 'create', '--name', 'plain', '--json');
    expect(plain.apps).toBeNull();

    const list = await json<KeyView[]>('keys', 'list', '--json');
    expect(list.find((k) => k.id === scoped.id)?.apps).toEqual([APP_A, PKG]);
    expect(list.find((k) => k.id === plain.id)?.apps).toBeNull();
    const table = (await ok('keys', 'list')).stdout.split('\n');
    expect(table[0]).toMatch(/APPS$/);
    expect(table.find((l) => l.startsWith(scoped.id))).toMatch(
      new RegExp(`\\s${APP_A},${PKG}$`.replaceAll('.', '\\.')),
    );
    expect(table.find((l) => l.startsWith(plain.id))).toMatch(/\sall$/);

    const events = await json<AuditView[]>('audit', 'list', '--action', 'keys.create', '--json');
    expect(events.find((e) => e.target === scoped.id)).toMatchObject({
      actor: 'alice',
      after: { name: 'bank backends', apps: [APP_A, PKG] },
    });
    expect(events.find((e) => e.target === plain.id)?.after).toMatchObject({ apps: null });
  });

  it('keys update --apps replaces the scope, --all-apps lifts it; each change audited, no change not', async () => {
    const key = await json<KeyView>('keys', 'create', '--name', 'switch', '--json');
    expect(await json('keys', 'update', key.id, '--apps', `${APP_B},${APP_A}`, '--json')).toEqual({
      id: key.id,
      apps: [APP_A, APP_B],
      changed: true,
    });
    // the same IDs in another order are no change
    const again = await ok('keys', 'update', key.id, '--apps', `${APP_A},${APP_B}`);
    expect(again.stdout).toBe(`${key.id} already verified tokens of ${APP_A}, ${APP_B}\n`);
    const lifted = await ok('keys', 'update', key.id, '--all-apps');
    expect(lifted.stdout).toMatch(/now verifies tokens of every allowlisted app; every instance/);
    // both kinds of change in one command
    expect(
      await json('keys', 'update', key.id, '--apps', PKG, '--result-tokens', 'on', '--json'),
    ).toEqual({ id: key.id, resultTokens: true, apps: [PKG], changed: true });

    const events = await json<AuditView[]>('audit', 'list', '--action', 'keys.update', '--json');
    expect(events.filter((e) => e.target === key.id)).toMatchObject([
      { actor: 'alice', before: { apps: null }, after: { apps: [APP_A, APP_B] } },
      { actor: 'alice', before: { apps: [APP_A, APP_B] }, after: { apps: null } },
      { before: { resultTokens: false }, after: { resultTokens: true } },
      { before: { apps: null }, after: { apps: [PKG] } },
    ]);
    expect(
      (await json<KeyView[]>('keys', 'list', '--json')).find((k) => k.id === key.id)?.apps,
    ).toEqual([PKG]);
    // a server on this data dir would want ATTEST_ISSUER for it
    await ok('keys', 'update', key.id, '--result-tokens', 'off');
  });

  const many = Array.from({ length: 65 }, (_, i) => `com.example.app${i}`).join(',');
  it.each([
    [
      ['keys', 'create', '--name', 'x', '--apps', ''],
      /--apps needs at least one app ID or package/,
    ],
    [['keys', 'create', '--name', 'x', '--apps', ' , '], /--apps needs at least one/],
    [['keys', 'create', '--name', 'x', '--apps', `${PKG},,${APP_A}`], /--apps has an empty entry/],
    [
      ['keys', 'create', '--name', 'x', '--apps', 'bank'],
      /--apps: "bank" is neither an App Attest app ID \(TEAMID\.bundle\.id\) nor an Android package name/,
    ],
    [['keys', 'create', '--name', 'x', '--apps', 'abcde12345.com.example app'], /is neither/],
    [['keys', 'create', '--name', 'x', '--apps', many], /--apps takes at most 64/],
    [['keys', 'create', '--name', 'x', '--apps'], /argument missing/],
    [['keys', 'update', '0h3k5x9q2m7c1b4n', '--apps', APP_A, '--all-apps'], /not both/],
    [['keys', 'update', '0h3k5x9q2m7c1b4n', '--apps', ''], /--apps needs at least one/],
    [['keys', 'update', '0h3k5x9q2m7c1b4n', '--apps', '1com.example'], /is neither/],
    [
      ['keys', 'update', '0h3k5x9q2m7c1b4n'],
      /nothing to change: .*--apps ID\[,ID\.\.\.\] or --all-apps/,
    ],
    [['keys', 'update', 'short', '--all-apps'], /an API key id is 16 characters/],
  ])('bad usage exits 2 with one line, nothing changed: %j', async (args, message) => {
    const before = (await ok('audit', 'list', '--json')).stdout;
    const run = await runCli(...args);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(oneLine(run)).toMatch(message);
    expect((await ok('audit', 'list', '--json')).stdout).toBe(before);
  });

  it('keys update of an unknown key is the negative answer, as for every key change (exit 1)', async () => {
    for (const flag of [['--apps', APP_A], ['--all-apps']]) {
      const run = await runCli('keys', 'update', '0000000000000000', ...flag);
      expect(run.code).toBe(1);
      expect(oneLine(run)).toMatch(/no API key with id "0000000000000000"/);
    }
  });
}

describe('app-scoped keys in the CLI (embedded database)', { timeout: 180_000 }, () => {
  let dir: string;
  const saved = { ...process.env };
  it.beforeAll(async ({ cliDataDir, tempDir }) => {
    void cliDataDir;
    dir = tempDir;
    process.env.ATTEST_ACTOR = 'alice';
  }, 180_000);
  afterAll(() => {
    process.env = saved;
  });

  scopeSuite();

  it('through a running server: a scope change applies to the next verify at once; verify-file --key-apps explains', async () => {
    const { logger, capture } = captureLogger();
    const server = await startServer(loadConfig({ port: 0, host: '127.0.0.1' }), logger, {
      migrate: false,
    });
    try {
      // every command below goes through the server's admin socket
      await ok('allowlist', 'add', 'apple', APP_A);
      await ok('allowlist', 'add', 'apple', APP_B);
      const key = await json<KeyView>(
        'keys',
        'create',
        '--name',
        'rp a',
        '--test',
        '--apps',
        APP_A,
        '--json',
      );
      const { ca } = await createDevCaRepository(server.database.db, TEST_SECRETS).put(
        await createDevCa(new Date()),
        { replace: false },
      );
      const registration = async (appId: string) => {
        const nonce = randomBytes(32);
        const device = createSimulatedKey();
        const attestation = await mintAttestation(ca, device, {
          appId,
          environment: 'Production',
          clientDataHash: createHash('sha256').update(nonce).digest(),
          now: new Date(),
        });
        return { nonce, token: encodeAppleToken({ nonce, keyId: device.keyId, attestation }) };
      };
      const verify = async (made: { nonce: Buffer; token: Uint8Array }) => {
        const res = await fetch(`${server.url}/api/v1/attestation/verify`, {
          method: 'POST',
          headers: { 'X-Api-Key': key.key!, 'Content-Type': 'application/json' },
          body: JSON.stringify({
            attestationToken: Buffer.from(made.token).toString('base64'),
            expectedNonce: made.nonce.toString('base64'),
          }),
        });
        expect(res.status).toBe(200);
        return ((await res.json()) as { isValid: boolean }).isValid;
      };

      expect(await verify(await registration(APP_A))).toBe(true);
      const forB = await registration(APP_B);
      expect(await verify(forB)).toBe(false);
      expect(capture.requests().at(-1)).toMatchObject({
        apiKeyId: key.id,
        reason: 'app_not_in_key_scope',
        appId: APP_B,
      });

      // verify-file, read-only through the same socket, as the scoped key would verify
      const file = join(dir, 'b.cbor');
      const b = await registration(APP_B);
      writeFileSync(file, b.token);
      const nonce = b.nonce.toString('base64');
      const explained = await runCli(
        'verify-file',
        file,
        '--nonce',
        nonce,
        '--dev-roots',
        '--key-apps',
        APP_A,
        '--json',
      );
      expect(explained.code).toBe(1);
      expect(JSON.parse(explained.stdout)).toMatchObject({
        reason: 'app_not_in_key_scope',
        // attributed to the check that proves the app
        checks: expect.arrayContaining([
          expect.objectContaining({
            id: 'apple.attestation.appId',
            status: 'fail',
            reason: 'app_not_in_key_scope',
          }),
        ]),
      });
      expect((await runCli('verify-file', file, '--nonce', nonce, '--dev-roots')).code).toBe(0);
      const badFlag = await runCli('verify-file', file, '--nonce', nonce, '--key-apps', '');
      expect(badFlag.code).toBe(2);
      expect(oneLine(badFlag)).toMatch(/--key-apps needs at least one/);

      await ok('keys', 'update', key.id, '--apps', `${APP_A},${APP_B}`);
      expect(await verify(b)).toBe(true);
      await ok('keys', 'update', key.id, '--apps', APP_A);
      expect(await verify(await registration(APP_B))).toBe(false);
      await ok('keys', 'update', key.id, '--all-apps');
      expect(await verify(await registration(APP_B))).toBe(true);
    } finally {
      await server.close();
    }
  });
});

const pg = postgresBackend();
describe.skipIf(!pg)(
  'app-scoped keys in the CLI on PostgreSQL (DATABASE_URL)',
  { timeout: 120_000 },
  () => {
    const saved = { ...process.env };
    it.beforeAll(async ({ cliPostgres }) => {
      void cliPostgres;
      process.env.ATTEST_ACTOR = 'alice';
    });
    afterAll(() => {
      process.env = saved;
    });

    scopeSuite();
  },
);
