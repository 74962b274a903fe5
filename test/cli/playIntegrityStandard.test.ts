/**
 * The CLI side of standard requests and the newer verdicts: `allowlist add android` with a
 * service account and the policy flags (the list shows the account's email, never its key), and
 * `verify-file`, which verifies standard tokens only with `--online` (against the local Google),
 * with hints for the newer verdicts.
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, vi } from 'vitest';
import { encodeEnvelope } from '../../src/core/envelope.js';
import { oneLine, runCli } from '../support/cli.js';
import {
  createTestServiceAccount,
  startFakeGoogle,
  type FakeGoogle,
  type TestServiceAccount,
} from '../support/fakeGoogle.js';
import { TEST_CERT_DIGEST, TEST_PACKAGE } from '../support/googleFactory.js';
import { standardPayload, type StandardPayload } from '../support/standardPayload.js';
import { hintCodes, verifyFile } from '../support/verifyFileTokens.js';
import { it } from '../support/fixtures.js';

const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');

// every CLI run opens the database afresh: slow on a loaded machine with the embedded one
vi.setConfig({ testTimeout: 180_000, hookTimeout: 180_000 });
const NOW = new Date();

let dir: string;
let sa: TestServiceAccount;
let saFile: string;
let fake: FakeGoogle;
let googleEnv: Record<string, string>;
/** where the CLI finds its database: PostgreSQL when there is one (faster to open), else a data dir */
let dbEnv: Record<string, string>;

it.beforeAll(async ({ cliDatabase, tempDir }) => {
  dir = tempDir;
  sa = createTestServiceAccount();
  saFile = join(dir, 'sa.json');
  writeFileSync(saFile, sa.json);
  dbEnv = cliDatabase.env;
});
beforeEach(async () => {
  fake = await startFakeGoogle({ accounts: [sa] });
  googleEnv = {
    ATTEST_GOOGLE_OAUTH_URL: fake.oauthUrl,
    ATTEST_GOOGLE_PLAY_INTEGRITY_URL: fake.playIntegrityUrl,
    ...dbEnv,
  };
});
afterEach(async () => {
  await fake.close();
});

interface AndroidView {
  packageName: string;
  keyPairs: string[];
  requireLicensed: boolean;
  playProtectVerdicts: string[];
  denyAppAccessRisk: string[];
  maxDeviceActivity: string | null;
  serviceAccount: string | null;
}

async function listed(name: string): Promise<AndroidView | undefined> {
  const list = JSON.parse((await runCli('allowlist', 'list', '--json')).stdout) as {
    android: AndroidView[];
  };
  return list.android.find((p) => p.packageName === name);
}

describe('allowlist add android: service account and newer-verdict policy', () => {
  it('a service account alone allows a package for standard requests; list shows the email, never the key', async () => {
    const add = await runCli(
      'allowlist',
      'add',
      'android',
      'com.example.standard',
      '--service-account-file',
      saFile,
      '--json',
    );
    expect(add.code).toBe(0);
    expect(JSON.parse(add.stdout)).toEqual({
      kind: 'android',
      packageName: 'com.example.standard',
      keyId: null,
      serviceAccount: sa.account.clientEmail,
      package: 'added',
      pair: 'none',
      observe: [],
    });
    expect(await listed('com.example.standard')).toMatchObject({
      keyPairs: [],
      serviceAccount: sa.account.clientEmail,
    });
    const table = await runCli('allowlist', 'list');
    expect(table.stdout).toContain(`standard via ${sa.account.clientEmail}`);
    expect(table.stdout).toContain('(none: standard requests only)');
    for (const out of [
      add.stdout,
      table.stdout,
      (await runCli('allowlist', 'list', '--json')).stdout,
    ]) {
      expect(out).not.toContain('PRIVATE KEY');
      expect(out).not.toContain(sa.account.privateKeyId!);
    }
  });

  it('sets, keeps and clears each policy flag', async () => {
    await runCli(
      'allowlist',
      'add',
      'android',
      'com.example.policy',
      '--service-account-file',
      saFile,
    );
    const set = await runCli(
      'allowlist',
      'add',
      'android',
      'com.example.policy',
      '--require-licensed',
      '--require-play-protect',
      'no_issues,NO_DATA',
      '--deny-app-access-risk',
      'capturing,UNKNOWN_CONTROLLING',
      '--max-device-activity',
      '2',
    );
    expect(set.code).toBe(0);
    expect(await listed('com.example.policy')).toMatchObject({
      requireLicensed: true,
      playProtectVerdicts: ['NO_ISSUES', 'NO_DATA'],
      denyAppAccessRisk: ['KNOWN_CAPTURING', 'UNKNOWN_CAPTURING', 'UNKNOWN_CONTROLLING'],
      maxDeviceActivity: 'LEVEL_2',
      serviceAccount: sa.account.clientEmail,
    });
    // a flag not given leaves the stored value; --require-play-protect alone means NO_ISSUES
    await runCli('allowlist', 'add', 'android', 'com.example.policy', '--require-play-protect');
    expect(await listed('com.example.policy')).toMatchObject({
      requireLicensed: true,
      playProtectVerdicts: ['NO_ISSUES'],
      maxDeviceActivity: 'LEVEL_2',
    });
    const clear = await runCli(
      'allowlist',
      'add',
      'android',
      'com.example.policy',
      '--no-require-licensed',
      '--no-require-play-protect',
      '--no-deny-app-access-risk',
      '--no-max-device-activity',
      '--remove-service-account',
    );
    expect(clear.code).toBe(0);
    expect(await listed('com.example.policy')).toMatchObject({
      requireLicensed: false,
      playProtectVerdicts: [],
      denyAppAccessRisk: [],
      maxDeviceActivity: null,
      serviceAccount: null,
    });
  });

  it('a policy change alone needs an existing package', async () => {
    const run = await runCli(
      'allowlist',
      'add',
      'android',
      'com.example.nowhere',
      '--require-licensed',
    );
    expect(run.code).toBe(2);
    expect(oneLine(run)).toMatch(/not on the allowlist: a new package needs/);
    expect(await listed('com.example.nowhere')).toBeUndefined();
  });

  it.each([
    [['--require-play-protect', 'UNEVALUATED'], /--require-play-protect/],
    [['--deny-app-access-risk', 'screenreaders'], /--deny-app-access-risk/],
    [['--max-device-activity', 'LEVEL_9'], /--max-device-activity/],
    [['--service-account-file', '/nonexistent/sa.json'], /cannot read/],
    [['--service-account-file', 'KEYFILE_NOT_JSON'], /not JSON/],
    [['--service-account-file', 'KEYFILE_NO_KEY'], /private_key/],
    [['--service-account-file', 'KEYFILE', '--remove-service-account'], /not both/],
  ])('%j is a usage error', async (flags, message) => {
    const files: Record<string, string> = {
      KEYFILE: saFile,
      KEYFILE_NOT_JSON: join(dir, 'not.json'),
      KEYFILE_NO_KEY: join(dir, 'nokey.json'),
    };
    writeFileSync(files.KEYFILE_NOT_JSON!, 'hello');
    writeFileSync(
      files.KEYFILE_NO_KEY!,
      JSON.stringify({
        ...JSON.parse(sa.json),
        private_key: '-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n',
      }),
    );
    const run = await runCli(
      'allowlist',
      'add',
      'android',
      'com.example.bad',
      ...flags.map((f) => files[f] ?? f),
    );
    expect(run.code).toBe(2);
    expect(oneLine(run)).toMatch(message);
  });
});

describe('verify-file with standard tokens', () => {
  const PACKAGE = 'com.example.vf';
  beforeAll(async () => {
    expect(
      (
        await runCli(
          'allowlist',
          'add',
          'android',
          PACKAGE,
          '--service-account-file',
          saFile,
          '--cert-digest',
          b64(TEST_CERT_DIGEST),
          '--require-licensed',
        )
      ).code,
    ).toBe(0);
  });

  function tokenFile(
    nonce: Uint8Array,
    edit?: (p: StandardPayload) => void,
    packageName = PACKAGE,
  ): string {
    const integrityToken = fake.issue(
      packageName,
      standardPayload({ nonce, now: NOW, packageName, ...(edit ? { edit } : {}) }),
    );
    const token = encodeEnvelope({
      nonce,
      service: 'gms',
      evidence: new Map<string, unknown>([
        ['packageName', packageName],
        ['integrityToken', integrityToken],
        ['request', 'standard'],
      ]),
    });
    const path = join(dir, `token-${randomBytes(4).toString('hex')}`);
    writeFileSync(path, token);
    return path;
  }

  it('without --online says so and stops (exit 2), asking no one', async () => {
    const nonce = randomBytes(32);
    const run = await verifyFile([tokenFile(nonce), '--nonce', b64(nonce)], googleEnv);
    expect(run.code).toBe(2);
    expect(oneLine(run)).toMatch(
      /standard-request token: only Google can decode it; re-run with --online/,
    );
    expect(fake.counts).toEqual({ token: 0, decode: 0 });
  });

  it('with --online verifies it through Google with the stored service account', async () => {
    const nonce = randomBytes(32);
    const run = await verifyFile(
      [tokenFile(nonce), '--nonce', b64(nonce), '--online', '--json'],
      googleEnv,
    );
    expect(run.code).toBe(0);
    expect(run.json).toMatchObject({
      valid: true,
      source: 'database',
      facts: { request: 'standard', packageName: PACKAGE },
    });
    expect(run.json!.checks.find((c) => c.id === 'gms.decode')).toMatchObject({ status: 'pass' });
    expect(run.json!.checks.find((c) => c.id === 'gms.licensing')).toMatchObject({
      status: 'pass',
      detail: 'app licensing verdict is LICENSED',
    });
  });

  it('explains an unlicensed copy, and a licensing verdict that is not turned on, asking Google once', async () => {
    const nonce = randomBytes(32);
    const unlicensed = await verifyFile(
      [
        tokenFile(nonce, (p) => void (p.accountDetails = { appLicensingVerdict: 'UNLICENSED' })),
        '--nonce',
        b64(nonce),
        '--online',
        '--json',
      ],
      googleEnv,
    );
    expect(unlicensed.code).toBe(1);
    expect(unlicensed.json).toMatchObject({ valid: false, reason: 'gms_not_licensed' });
    expect(hintCodes(unlicensed)).toEqual(['not_licensed']);
    expect(fake.counts.decode).toBe(1);
    const absent = await verifyFile(
      [
        tokenFile(nonce, (p) => void delete p.accountDetails),
        '--nonce',
        b64(nonce),
        '--online',
        '--json',
      ],
      googleEnv,
    );
    expect(absent.json).toMatchObject({
      valid: false,
      reason: 'gms_not_licensed',
      facts: { missingVerdict: 'accountDetails.appLicensingVerdict' },
    });
    expect(hintCodes(absent)).toEqual(['verdict_not_opted_in']);
  });

  it('flags mode: --package with --service-account-file, no keys needed; a token Google refuses', async () => {
    const nonce = randomBytes(32);
    const ok = await verifyFile(
      [
        tokenFile(nonce, undefined, TEST_PACKAGE),
        '--nonce',
        b64(nonce),
        '--online',
        '--package',
        TEST_PACKAGE,
        '--service-account-file',
        saFile,
        '--json',
      ],
      googleEnv,
    );
    expect(ok.json).toMatchObject({ valid: true, source: 'flags' });
    fake.faultNext('decode', { status: 400 });
    const rejected = await verifyFile(
      [
        tokenFile(nonce, undefined, TEST_PACKAGE),
        '--nonce',
        b64(nonce),
        '--online',
        '--package',
        TEST_PACKAGE,
        '--service-account-file',
        saFile,
        '--json',
      ],
      googleEnv,
    );
    expect(rejected.code).toBe(1);
    expect(rejected.json).toMatchObject({ valid: false, reason: 'gms_decode_rejected' });
  });

  it('Google giving no verdict is a runtime failure (exit 3), one line', async () => {
    const nonce = randomBytes(32);
    fake.faultNext('decode', { status: 503 });
    const run = await verifyFile([tokenFile(nonce), '--nonce', b64(nonce), '--online'], googleEnv);
    expect(run.code).toBe(3);
    expect(oneLine(run)).toMatch(
      /^attest: Google gave no verdict: decodeIntegrityToken answered HTTP 503/,
    );
  });

  it('--service-account-file without --package and --online is a usage error', async () => {
    const nonce = randomBytes(32);
    const run = await verifyFile([tokenFile(nonce), '--service-account-file', saFile], googleEnv);
    expect(run.code).toBe(2);
    expect(oneLine(run)).toMatch(/needs --package and --online/);
  });
});
