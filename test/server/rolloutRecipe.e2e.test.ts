// The rollout recipe of docs/operations.md ("Rolling out a rule: observe, read, enforce") walked
// with the CLI and tokens from `attest dev mint gms`, on the embedded engine and on PostgreSQL:
// the rule set and observed in one command (which prints the stats command to run), verifies of
// minted tokens counted by a running service, `attest stats --app` giving the share the rule
// would turn away, and `--enforce` printing that share and rejecting from the next verify.
import { afterAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { defaultAppleRoots } from '../../src/core/apple/trustRoots.js';
import { createVerificationStatsRepository } from '../../src/db/verificationStats.js';
import { createStatsRecorder } from '../../src/server/statsRecorder.js';
import { runCli } from '../support/cli.js';
import { backends, useDatabase } from '../support/databases.js';
import { TEST_MASTER_KEY_ENV } from '../support/secrets.js';
import { createPlatformService, issueKey, verifySessionless } from '../support/service.js';

// every CLI run opens the database afresh
vi.setConfig({ testTimeout: 180_000, hookTimeout: 180_000 });

const PKG = 'com.example.rollout';
const CODE = 'gms_account_activity';

afterAll(() => {
  delete process.env.DATABASE_URL;
  delete process.env.ATTEST_MASTER_KEY;
});

describe.each(backends())('the rollout recipe with minted tokens on $name', (backend) => {
  const db = useDatabase(backend);

  beforeEach(() => {
    delete process.env.ATTEST_DATA_DIR;
    process.env.DATABASE_URL = db.url;
    process.env.ATTEST_MASTER_KEY = TEST_MASTER_KEY_ENV;
  });

  it('observe, read the share with attest stats, enforce', async () => {
    const cli = async (...args: string[]) => {
      const run = await runCli(...args);
      expect(run.code, `${args.join(' ')}: ${run.stderr}`).toBe(0);
      return run;
    };
    await cli('allowlist', 'add', 'android', PKG, '--without-keys');
    // dev mint tokens are sealed with the package's test-only pair: a test key verifies them
    const key = (await issueKey(db, { mode: 'test' })).key;
    const recorder = createStatsRecorder({
      write: (rows) => createVerificationStatsRepository(db.db).add(rows),
      retentionSeconds: 86_400,
    });
    const service = createPlatformService(db, {
      now: () => new Date(),
      appleRoots: defaultAppleRoots(),
      stats: recorder,
    });
    const verifyMinted = async (level: string) => {
      const res = await verifySessionless(service.app, key, async (nonce) => {
        const run = await cli(
          'dev',
          'mint',
          'gms',
          '--package',
          PKG,
          '--nonce',
          nonce.toString('base64'),
          '--account-activity',
          level,
        );
        return run.stdout.trim();
      });
      return ((await res.json()) as { isValid: boolean }).isValid;
    };

    // 1. set the rule and observe it in one command: it prints what to run next
    const observe = await cli(
      'allowlist',
      'add',
      'android',
      PKG,
      '--min-account-activity',
      'typical_basic',
      '--observe',
      CODE,
    );
    expect(observe.stdout + observe.stderr).toContain(`attest stats --app ${PKG}`);

    // 2. traffic while observed: 3 would be turned away, 2 pass the rule; all are valid
    for (const level of ['UNUSUAL', 'UNKNOWN', 'UNUSUAL', 'TYPICAL_BASIC', 'TYPICAL_STRONG'])
      expect(await verifyMinted(level)).toBe(true);
    expect(service.logs.requests().filter((l) => Array.isArray(l.observed))).toHaveLength(3);
    await recorder.flush();

    // the rehearsal's traffic is a test key's: the live figures (the default) have none of it
    const live = await cli('stats', '--app', PKG, '--json');
    expect(JSON.parse(live.stdout).rules).toEqual([
      expect.objectContaining({ mode: 'live', verifies: 0, valid: 0, wouldReject: 0, share: null }),
    ]);
    const stats = await cli('stats', '--app', PKG, '--json', '--mode', 'test');
    const { rules } = JSON.parse(stats.stdout) as { rules: Record<string, unknown>[] };
    expect(rules).toEqual([
      expect.objectContaining({
        app: PKG,
        mode: 'test',
        reason: CODE,
        verifies: 5,
        valid: 5,
        wouldReject: 3,
        share: 0.6,
      }),
    ]);
    expect((await cli('stats', '--app', PKG, '--mode', 'test')).stdout).toMatch(
      new RegExp(`${PKG}\\s+${CODE}\\s+\\S+\\s+5\\s+5\\s+3\\s+60(\\.0)?%`),
    );

    // 3. enforce: the command says what the share was; the next unusual account is refused
    const enforce = await cli(
      'allowlist',
      'add',
      'android',
      PKG,
      '--enforce',
      CODE,
      '--mode',
      'test',
    );
    expect(enforce.stdout + enforce.stderr).toMatch(
      /would have rejected 3 of 5 valid verifies of test keys \(60\.0%\)/,
    );
    expect(await verifyMinted('UNUSUAL')).toBe(false);
    expect(service.logs.last()).toMatchObject({ isValid: false, reason: CODE });
    expect(await verifyMinted('TYPICAL_STRONG')).toBe(true);
    await recorder.flush();
  });
});
