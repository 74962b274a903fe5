/**
 * The CLI side of Play device recall: `allowlist add android --deny-recall-bits` (set, kept when
 * absent, cleared with --no-deny-recall-bits, shown by `allowlist list` and its --json), a bad
 * value a usage error, and `dev mint gms --recall` tokens that `verify-file` rejects with
 * `gms_device_recalled` and the `device_recalled` hint when the package denies the bit.
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, vi } from 'vitest';
import { oneLine, runCli } from '../support/cli.js';
import { hintCodes, verifyFile } from '../support/verifyFileTokens.js';
import { it } from '../support/fixtures.js';

const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');
const PACKAGE = 'com.example.recall';

// every CLI run opens the database afresh: slow on a loaded machine with the embedded one
vi.setConfig({ testTimeout: 180_000, hookTimeout: 180_000 });

let dir: string;
/** where the CLI finds its database: PostgreSQL when there is one (faster to open), else a data dir */
let dbEnv: Record<string, string>;

it.beforeAll(async ({ cliDatabase, tempDir }) => {
  dir = tempDir;
  dbEnv = cliDatabase.env;
  expect((await runCli('allowlist', 'add', 'android', PACKAGE, '--without-keys')).code).toBe(0);
});
async function denied(): Promise<string[] | undefined> {
  const list = JSON.parse((await runCli('allowlist', 'list', '--json')).stdout) as {
    android: { packageName: string; denyRecallBits: string[] }[];
  };
  return list.android.find((p) => p.packageName === PACKAGE)?.denyRecallBits;
}

describe('allowlist add android --deny-recall-bits', () => {
  it('sets, keeps and clears the bits; the list shows them', async () => {
    expect(await denied()).toEqual([]);
    const set = await runCli(
      'allowlist',
      'add',
      'android',
      PACKAGE,
      '--deny-recall-bits',
      'Third,first',
    );
    expect(set.code).toBe(0);
    expect(await denied()).toEqual(['first', 'third']);
    expect((await runCli('allowlist', 'list')).stdout).toContain('deny recall first|third');
    // another flag leaves the bits as they are
    expect((await runCli('allowlist', 'add', 'android', PACKAGE, '--max-age', '300')).code).toBe(0);
    expect(await denied()).toEqual(['first', 'third']);
    const clear = await runCli('allowlist', 'add', 'android', PACKAGE, '--no-deny-recall-bits');
    expect(clear.code).toBe(0);
    expect(await denied()).toEqual([]);
    expect((await runCli('allowlist', 'list')).stdout).not.toContain('deny recall');
  });

  it.each([['fourth'], [','], ['first,bitFifth']])(
    '--deny-recall-bits %j is a usage error and changes nothing',
    async (value) => {
      const run = await runCli('allowlist', 'add', 'android', PACKAGE, '--deny-recall-bits', value);
      expect(run.code).toBe(2);
      expect(oneLine(run)).toMatch(/--deny-recall-bits/);
      expect(await denied()).toEqual([]);
    },
  );
});

describe('dev mint gms --recall, explained by verify-file', () => {
  /** a minted token over a fresh nonce, saved to a file */
  async function minted(...extra: string[]) {
    const nonce = b64(randomBytes(32));
    const run = await runCli(
      'dev',
      'mint',
      'gms',
      '--package',
      PACKAGE,
      '--nonce',
      nonce,
      ...extra,
    );
    expect(run.code).toBe(0);
    const file = join(dir, `token-${randomBytes(4).toString('hex')}.txt`);
    writeFileSync(file, run.stdout.trim());
    return { file, nonce };
  }

  it('a denied bit set: gms_device_recalled, with a hint that names the flag', async () => {
    await runCli('allowlist', 'add', 'android', PACKAGE, '--deny-recall-bits', 'second');
    const { file, nonce } = await minted('--recall', 'second');
    const run = await verifyFile([file, '--nonce', nonce, '--dev-roots', '--json'], dbEnv);
    expect(run.code).toBe(1);
    expect(run.json).toMatchObject({ valid: false, reason: 'gms_device_recalled' });
    expect(run.json!.checks.find((c) => c.id === 'gms.deviceRecall')).toMatchObject({
      status: 'fail',
    });
    expect(hintCodes(run)).toEqual(['device_recalled']);
  });

  it('bits the package does not deny pass, and verify-file shows them', async () => {
    await runCli('allowlist', 'add', 'android', PACKAGE, '--deny-recall-bits', 'second');
    const { file, nonce } = await minted('--recall', 'first,third');
    const run = await verifyFile([file, '--nonce', nonce, '--dev-roots', '--json'], dbEnv);
    expect(run.code).toBe(0);
    expect(run.json).toMatchObject({ valid: true });
    expect(run.json!.checks.find((c) => c.id === 'gms.deviceRecall')).toMatchObject({
      status: 'pass',
    });
  });

  it('--recall with an unknown bit is a usage error', async () => {
    const run = await runCli(
      'dev',
      'mint',
      'gms',
      '--package',
      PACKAGE,
      '--nonce',
      b64(randomBytes(32)),
      '--recall',
      'zeroth',
    );
    expect(run.code).toBe(2);
    expect(oneLine(run)).toMatch(/--recall/);
  });
});
