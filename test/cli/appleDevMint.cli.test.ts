/**
 * App Attest development tokens from the command line: `dev mint apple --platform macos` makes a
 * Mac key's registration and `verify-file --dev-roots` reports its platform; `allowlist add apple
 * --platforms` sets, shows and clears the rule (a wrong name is one line, exit 2); a registration
 * without a receipt reads "receipt: none", not INVALID.
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { runCli } from '../support/cli.js';
import { TEST_MASTER_KEY_ENV } from '../support/secrets.js';
import { verifyFile } from '../support/verifyFileTokens.js';
import { it } from '../support/fixtures.js';

const APP = 'ABCDE12345.com.example.mac';
let dir: string;
let dataDir: string;
it.override('dataDirEnv', { ATTEST_MASTER_KEY: TEST_MASTER_KEY_ENV });
it.beforeAll(async ({ cliDataDir, tempDir }) => {
  dir = tempDir;
  dataDir = cliDataDir.path;
  expect((await runCli('dev', 'init')).code).toBe(0);
  expect((await runCli('allowlist', 'add', 'apple', APP)).code).toBe(0);
}, 120_000);

async function mintAndVerify(device: string, extra: string[], json = true) {
  const nonce = randomBytes(32).toString('base64');
  const minted = await runCli(
    'dev',
    'mint',
    'apple',
    '--app-id',
    APP,
    '--device',
    join(dir, device),
    '--nonce',
    nonce,
    ...extra,
  );
  expect(minted.code, minted.stderr).toBe(0);
  const file = join(dir, `${device}.b64`);
  writeFileSync(file, minted.stdout);
  return verifyFile([file, '--nonce', nonce, '--dev-roots', ...(json ? ['--json'] : [])], {
    ATTEST_DATA_DIR: dataDir,
  });
}

it('dev mint apple --platform macos: the registration is reported as macOS; the default as iOS', async () => {
  const mac = await mintAndVerify('mac.json', ['--platform', 'macos']);
  expect(mac.json!.valid).toBe(true);
  expect(mac.json!.details).toMatchObject({ appleTokenDetails: { platform: 'macOS' } });
  const phone = await mintAndVerify('phone.json', []);
  expect(phone.json!.valid).toBe(true);
  expect(phone.json!.details).toMatchObject({ appleTokenDetails: { platform: 'iOS' } });
  const wrong = await runCli('dev', 'mint', 'apple', '--app-id', APP, '--platform', 'watchos');
  expect(wrong.code).toBe(2);
  // the app takes iOS only: the Mac key is refused with the rule's reason, the iPhone key is not
  expect((await runCli('allowlist', 'add', 'apple', APP, '--platforms', 'ios')).code).toBe(0);
  const refused = await mintAndVerify('mac2.json', ['--platform', 'macos']);
  expect(refused.json).toMatchObject({ valid: false, reason: 'apple_platform_not_allowed' });
  expect((await mintAndVerify('phone2.json', [])).json!.valid).toBe(true);
  expect((await runCli('allowlist', 'add', 'apple', APP, '--no-platforms')).code).toBe(0);
});

it('allowlist add apple --platforms: set, shown, kept, cleared; a wrong name is one line, exit 2', async () => {
  const set = await runCli('allowlist', 'add', 'apple', APP, '--platforms', 'iOS');
  expect(set.code, set.stderr).toBe(0);
  expect(set.stdout).toMatch(/platform ios/);
  const kept = JSON.parse((await runCli('allowlist', 'add', 'apple', APP, '--json')).stdout) as {
    policy: { platforms: string[] };
  };
  expect(kept.policy.platforms).toEqual(['ios']);
  const both = JSON.parse(
    (await runCli('allowlist', 'add', 'apple', APP, '--platforms', 'macos,ios', '--json')).stdout,
  ) as { policy: { platforms: string[] } };
  expect(both.policy.platforms).toEqual(['ios', 'macos']);
  const cleared = JSON.parse(
    (await runCli('allowlist', 'add', 'apple', APP, '--no-platforms', '--json')).stdout,
  ) as { policy: { platforms: string[] } };
  expect(cleared.policy.platforms).toEqual([]);
  const bad = await runCli('allowlist', 'add', 'apple', APP, '--platforms', 'ios,windows');
  expect(bad.code).toBe(2);
  expect(bad.stderr.trim().split('\n')).toHaveLength(1);
  expect(bad.stderr).toMatch(/--platforms takes ios, macos/);
});

it('a registration without a receipt: valid, "receipt: none" and present false, never INVALID; with --receipt: valid', async () => {
  const bare = await mintAndVerify('bare.json', [], false);
  expect(bare.code).toBe(0);
  expect(bare.stdout).toMatch(/^receipt: none \(the attestation carries no receipt; /m);
  expect(bare.stdout).not.toContain('INVALID');
  const bareJson = await mintAndVerify('bare2.json', []);
  expect(bareJson.json).toMatchObject({ valid: true, receipt: { valid: false, present: false } });
  const withReceipt = await mintAndVerify('receipt.json', ['--receipt'], false);
  expect(withReceipt.stdout).toMatch(/^receipt: valid \(ATTEST/m);
  const withReceiptJson = await mintAndVerify('receipt2.json', ['--receipt']);
  expect(withReceiptJson.json).toMatchObject({ receipt: { valid: true, present: true } });
});
