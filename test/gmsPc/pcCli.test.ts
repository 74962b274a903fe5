/**
 * The CLI side of `gms-pc`: `dev mint gms-pc` prints a token and the verdict Google must answer,
 * the local fake Google answers it, and `verify-file --online` verifies the token (from the
 * database's entry, or offline from --package --service-account-file); without --online it says
 * only Google can decode it. `token wrap gms-pc` wraps a PC token a game received.
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, vi } from 'vitest';
import { oneLine, runCli } from '../support/cli.js';
import {
  createTestServiceAccount,
  startFakeGoogle,
  type FakeGoogle,
  type TestServiceAccount,
} from '../support/fakeGoogle.js';
import { verifyFile } from '../support/verifyFileTokens.js';
import { it } from '../support/fixtures.js';

const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');
vi.setConfig({ testTimeout: 180_000, hookTimeout: 180_000 });

const PACKAGE = 'com.example.pcgame';
let dir: string;
let sa: TestServiceAccount;
let saFile: string;
let fake: FakeGoogle;
let env: Record<string, string>;
let dbEnv: Record<string, string>;

it.beforeAll(async ({ cliDatabase, tempDir }) => {
  dir = tempDir;
  sa = createTestServiceAccount();
  saFile = join(dir, 'sa.json');
  writeFileSync(saFile, sa.json);
  dbEnv = cliDatabase.env;
  expect(
    (await runCli('allowlist', 'add', 'android', PACKAGE, '--service-account-file', saFile)).code,
  ).toBe(0);
});
beforeEach(async () => {
  fake = await startFakeGoogle({ accounts: [sa] });
  env = {
    ATTEST_GOOGLE_OAUTH_URL: fake.oauthUrl,
    ATTEST_GOOGLE_PLAY_INTEGRITY_URL: fake.playIntegrityUrl,
    ...dbEnv,
  };
});
afterEach(async () => {
  await fake.close();
});

/** `dev mint gms-pc`, its verdict registered with the fake Google; the token's file path */
async function mint(nonce: Uint8Array, ...flags: string[]): Promise<string> {
  const run = await runCli(
    'dev',
    'mint',
    'gms-pc',
    '--package',
    PACKAGE,
    '--nonce',
    b64(nonce),
    '--json',
    ...flags,
  );
  expect(run.code, run.stderr).toBe(0);
  const out = JSON.parse(run.stdout) as {
    token: string;
    integrityToken: string;
    tokenPayloadExternal: unknown;
  };
  // the fake answers the minted integrity token with the minted verdict
  fake.issuePc(PACKAGE, out.tokenPayloadExternal, out.integrityToken);
  const path = join(dir, `pc-${randomBytes(4).toString('hex')}`);
  writeFileSync(path, out.token);
  return path;
}

it('dev mint + verify-file --online: valid through Google, with the gms-pc checks', async () => {
  const nonce = randomBytes(32);
  const run = await verifyFile(
    [await mint(nonce), '--nonce', b64(nonce), '--online', '--json'],
    env,
  );
  expect(run.code, run.stderr).toBe(0);
  expect(run.json).toMatchObject({ valid: true, source: 'database' });
  expect(run.json!.checks.map((c) => c.id)).toContain('gmsPc.requestHash');
  expect(fake.counts.decode).toBe(1);
});

it('a stale minted token is gms_pc_token_stale (exit 1)', async () => {
  const nonce = randomBytes(32);
  const run = await verifyFile(
    [await mint(nonce, '--age', '1h'), '--nonce', b64(nonce), '--online', '--json'],
    env,
  );
  expect(run.json).toMatchObject({ valid: false, reason: 'gms_pc_token_stale' });
});

it('without --online it says only Google can decode it, asking no one (exit 2)', async () => {
  const nonce = randomBytes(32);
  const run = await verifyFile([await mint(nonce), '--nonce', b64(nonce)], env);
  expect(run.code).toBe(2);
  expect(oneLine(run)).toMatch(/Play Integrity for PC token: only Google can decode it/);
  expect(fake.counts.decode).toBe(0);
});

it('token wrap gms-pc wraps a PC token that verify-file then verifies', async () => {
  const nonce = randomBytes(32);
  const { mintPcPayload } = await import('../../src/core/gmsPc/pcMint.js');
  const pcToken = fake.issuePc(
    PACKAGE,
    mintPcPayload({ packageName: PACKAGE, nonce, requestTime: new Date() }),
  );
  const input = join(dir, 'pc.txt');
  writeFileSync(input, `${pcToken}\n`);
  const wrap = await runCli(
    'token',
    'wrap',
    'gms-pc',
    '--package',
    PACKAGE,
    '--integrity-token',
    input,
    '--nonce',
    b64(nonce),
  );
  expect(wrap.code, wrap.stderr).toBe(0);
  const path = join(dir, 'wrapped');
  writeFileSync(path, wrap.stdout.trim());
  const run = await verifyFile([path, '--nonce', b64(nonce), '--online', '--json'], env);
  expect(run.json).toMatchObject({ valid: true });
});
