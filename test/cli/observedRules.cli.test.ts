/**
 * `allowlist add apple|android --observe / --enforce` through the CLI, on the embedded database
 * (through the running server's admin socket) and on PostgreSQL; and the admin operation's own
 * refusal of codes that can never be observed.
 */
import { afterAll, describe, expect } from 'vitest';
import { AdminError } from '../../src/admin/adminError.js';
import { runOperation } from '../../src/admin/operations.js';
import type { OperationContext } from '../../src/admin/operation.js';
import { loadConfig } from '../../src/config.js';
import { observableCodes } from '../../src/core/observedRules.js';
import { startServer, type RunningServer } from '../../src/server/start.js';
import { oneLine, runCli } from '../support/cli.js';
import { backends, postgresBackend, useDatabase } from '../support/databases.js';
import { TEST_SECRETS } from '../support/secrets.js';
import { captureLogger } from '../support/service.js';
import { it } from '../support/fixtures.js';

const APP = 'ABCDE12345.com.example.observe';
const PKG = 'com.example.observe';

interface Listed {
  apple: { appId: string; observe: string[] }[];
  android: { packageName: string; observe: string[] }[];
}
const listed = async () =>
  JSON.parse((await runCli('allowlist', 'list', '--json')).stdout) as Listed;

function observeSuite() {
  it('apple: --observe adds codes, --enforce removes them, --enforce all empties; list and --json show the set; other flags keep it', async () => {
    const added = await runCli(
      'allowlist',
      'add',
      'apple',
      APP,
      '--observe',
      'apple_risk_exceeded,apple_receipt_invalid',
    );
    expect(added.code, added.stderr).toBe(0);
    expect(added.stdout).toContain('observe apple_receipt_invalid|apple_risk_exceeded');

    const more = await runCli(
      'allowlist',
      'add',
      'apple',
      APP,
      '--observe',
      'apple_environment_not_allowed',
      '--json',
    );
    expect(JSON.parse(more.stdout).policy.observe).toEqual([
      'apple_environment_not_allowed',
      'apple_receipt_invalid',
      'apple_risk_exceeded',
    ]);
    // another policy flag keeps the set
    await runCli('allowlist', 'add', 'apple', APP, '--require-receipt');
    expect((await listed()).apple.find((a) => a.appId === APP)!.observe).toHaveLength(3);
    const table = await runCli('allowlist', 'list');
    expect(table.stdout).toMatch(
      /ABCDE12345\.com\.example\.observe .*observe apple_environment_not_allowed\|apple_receipt_invalid\|apple_risk_exceeded/,
    );

    const fewer = await runCli(
      'allowlist',
      'add',
      'apple',
      APP,
      '--enforce',
      'apple_risk_exceeded,apple_environment_not_allowed',
      '--json',
    );
    expect(JSON.parse(fewer.stdout).policy.observe).toEqual(['apple_receipt_invalid']);
    const none = await runCli('allowlist', 'add', 'apple', APP, '--enforce', 'all', '--json');
    expect(JSON.parse(none.stdout).policy.observe).toEqual([]);
    expect((await listed()).apple.find((a) => a.appId === APP)!.observe).toEqual([]);
  });

  it('apple: a code that is not observable for apps is exit 2 with one line listing the observable ones, and changes nothing', async () => {
    await runCli('allowlist', 'add', 'apple', APP, '--observe', 'apple_risk_exceeded');
    for (const [flag, value] of [
      ['--observe', 'apple_signature_invalid'],
      ['--observe', 'apple_counter_replay,apple_risk_exceeded'],
      ['--observe', 'gms_play_protect'],
      ['--enforce', 'apple_app_not_allowed'],
      ['--observe', ''],
    ] as const) {
      const run = await runCli('allowlist', 'add', 'apple', APP, flag, value);
      expect(run.code, `${flag} ${value}`).toBe(2);
      expect(run.stdout).toBe('');
      const line = oneLine(run);
      expect(line).toContain(flag);
      expect(line).toContain(observableCodes('apple').join(', '));
    }
    const both = await runCli(
      'allowlist',
      'add',
      'apple',
      APP,
      '--observe',
      'apple_risk_exceeded',
      '--enforce',
      'apple_risk_exceeded',
    );
    expect(both.code).toBe(2);
    expect(oneLine(both)).toMatch(/not both/);
    expect((await listed()).apple.find((a) => a.appId === APP)!.observe).toEqual([
      'apple_risk_exceeded',
    ]);
  });

  it('android: one set for gms and android-key codes; identity codes refused with the observable list; --enforce all', async () => {
    const added = await runCli(
      'allowlist',
      'add',
      'android',
      PKG,
      '--key-attestation',
      '--without-keys',
      '--observe',
      'android_patch_level_stale,gms_play_protect',
    );
    expect(added.code, added.stderr).toBe(0);
    expect(added.stdout).toContain('observe gms_play_protect, android_patch_level_stale');
    const pkg = () => listed().then((l) => l.android.find((p) => p.packageName === PKG)!);
    expect((await pkg()).observe).toEqual(['gms_play_protect', 'android_patch_level_stale']);
    expect((await runCli('allowlist', 'list')).stdout).toMatch(
      /com\.example\.observe .*observe gms_play_protect\|android_patch_level_stale/,
    );

    // a policy-only change of an existing package: the flags alone need no keys
    const json = await runCli(
      'allowlist',
      'add',
      'android',
      PKG,
      '--observe',
      'gms_integrity_insufficient',
      '--json',
    );
    expect(json.code, json.stderr).toBe(0);
    expect(JSON.parse(json.stdout).observe).toEqual([
      'gms_integrity_insufficient',
      'gms_play_protect',
      'android_patch_level_stale',
    ]);

    for (const code of [
      'gms_certificate_mismatch',
      'android_chain_revoked',
      'apple_risk_exceeded',
    ]) {
      const run = await runCli('allowlist', 'add', 'android', PKG, '--observe', code);
      expect(run.code, code).toBe(2);
      expect(oneLine(run)).toContain(observableCodes('android').join(', '));
    }
    const none = await runCli('allowlist', 'add', 'android', PKG, '--enforce', 'all');
    expect(none.code).toBe(0);
    expect(none.stdout).toContain('observe nothing');
    expect((await pkg()).observe).toEqual([]);
  });

  it('allowlist show: one entry with its observed set (text and --json); an absent one exit 1, a bad kind exit 2', async () => {
    const json = await runCli('allowlist', 'show', 'apple', APP, '--json');
    expect(json.code, json.stderr).toBe(0);
    const shown = JSON.parse(json.stdout) as { appId: string; observe: string[] };
    expect(shown).toEqual((await listed()).apple.find((a) => a.appId === APP));
    expect(shown.observe).toEqual(['apple_risk_exceeded']);

    const text = await runCli('allowlist', 'show', 'android', PKG);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout.trim().split('\n')).toHaveLength(2);
    expect(text.stdout).toMatch(/^android\s+com\.example\.observe\s/m);

    const absent = await runCli('allowlist', 'show', 'android', 'com.example.absent');
    expect(absent.code).toBe(1);
    expect(oneLine(absent)).toContain('com.example.absent is not on the allowlist');
    const badKind = await runCli('allowlist', 'show', 'ios', APP);
    expect(badKind.code).toBe(2);
    expect(oneLine(badKind)).toContain('kind must be "apple" or "android"');
  });

  it('every change is an audit event with the set before and after', async () => {
    const events = JSON.parse(
      (await runCli('audit', 'list', '--action', 'allowlist', '--json')).stdout,
    ) as { target: string; before: { observe?: string[] } | null; after: { observe: string[] } }[];
    const mine = events.filter((e) => e.target === `android:${PKG}`);
    expect(mine.map((e) => [e.before?.observe, e.after.observe])).toEqual([
      [undefined, ['gms_play_protect', 'android_patch_level_stale']],
      [
        ['gms_play_protect', 'android_patch_level_stale'],
        ['gms_integrity_insufficient', 'gms_play_protect', 'android_patch_level_stale'],
      ],
      [['gms_integrity_insufficient', 'gms_play_protect', 'android_patch_level_stale'], []],
    ]);
    const apple = events.filter((e) => e.target === `apple:${APP}`);
    expect(apple.at(-1)).toMatchObject({
      before: { observe: [] },
      after: { observe: ['apple_risk_exceeded'] },
    });
  });
}

describe('allowlist --observe / --enforce on the embedded database, through the admin socket', () => {
  let server: RunningServer | undefined;
  it.beforeAll(async ({ cliDataDir }) => {
    void cliDataDir;
    const { logger } = captureLogger();
    server = await startServer(loadConfig({ port: 0, host: '127.0.0.1' }), logger, {
      migrate: false,
    });
  }, 120_000);
  afterAll(async () => {
    await server?.close();
  });
  observeSuite();
});

const pg = postgresBackend();
describe.skipIf(!pg)('allowlist --observe / --enforce on PostgreSQL (DATABASE_URL)', () => {
  it.beforeAll(async ({ cliPostgres }) => void cliPostgres);
  observeSuite();
});

describe.each(backends())(
  'the admin operation refuses codes that cannot be observed ($name)',
  (backend) => {
    const db = useDatabase(backend);
    const ctx = (): OperationContext => ({
      handle: db,
      secrets: async () => TEST_SECRETS,
      auditor: { actor: 'test', log: () => {} },
    });
    const refusal = async (name: 'allowlist.addApple' | 'allowlist.addAndroid', input: unknown) => {
      const err = await runOperation(name, input as never, ctx()).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(AdminError);
      return err as AdminError;
    };

    it('apple: identity codes and android codes', async () => {
      for (const code of ['apple_signature_invalid', 'apple_key_id_mismatch', 'gms_play_protect']) {
        const err = await refusal('allowlist.addApple', {
          appId: APP,
          policy: { observeChange: { observe: [code] } },
        });
        expect(err.message).toContain('not observable for apple');
      }
      const enforce = await refusal('allowlist.addApple', {
        appId: APP,
        policy: { observeChange: { enforce: ['nonce_mismatch'] } },
      });
      expect(enforce.message).toContain('observeChange');
    });

    it('android: identity codes and apple codes; a valid change goes through', async () => {
      for (const code of ['gms_token_stale', 'android_signature_invalid', 'apple_risk_exceeded']) {
        const err = await refusal('allowlist.addAndroid', {
          packageName: PKG,
          pair: null,
          withoutKeys: true,
          policy: { observeChange: { observe: [code] } },
        });
        expect(err.message).toContain('not observable for android');
      }
      const ok = await runOperation(
        'allowlist.addAndroid',
        {
          packageName: PKG,
          pair: null,
          withoutKeys: true,
          policy: { observeChange: { observe: ['gms_device_activity'] } },
        },
        ctx(),
      );
      expect(ok.observe).toEqual(['gms_device_activity']);
    });
  },
);
