/**
 * The CLI side of Play's 2026 verdicts and of rehearsing every rule without a device:
 * `allowlist add android --min-account-activity / --deny-location-spoofing` (set, kept, cleared,
 * listed, usage errors); `dev mint gms` setting every verdict field a rule reads, shown by
 * `verify-file` and failing each rule with its reason and hint; `dev mint android-key`'s
 * self-signed boot and patch level; and `keys create / update / list --rejection-details`.
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, vi } from 'vitest';
import { oneLine, runCli } from '../support/cli.js';
import { hintCodes, verifyFile } from '../support/verifyFileTokens.js';
import { it } from '../support/fixtures.js';

const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');
const PACKAGE = 'com.example.verdicts';

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

interface Listed {
  packageName: string;
  minAccountActivity: string | null;
  denyLocationSpoofing: string[];
}

async function listed(name = PACKAGE): Promise<Listed | undefined> {
  const list = JSON.parse((await runCli('allowlist', 'list', '--json')).stdout) as {
    android: Listed[];
  };
  return list.android.find((p) => p.packageName === name);
}

const add = (...flags: string[]) => runCli('allowlist', 'add', 'android', PACKAGE, ...flags);

describe('allowlist add android: account activity and location spoofing rules', () => {
  it('sets, keeps and clears them; the list shows them', async () => {
    expect(await listed()).toMatchObject({ minAccountActivity: null, denyLocationSpoofing: [] });
    const set = await add(
      '--min-account-activity',
      'typical-basic',
      '--deny-location-spoofing',
      'high_risk_device,A_FUTURE_RISK',
    );
    expect(set.code, set.stderr).toBe(0);
    expect(await listed()).toMatchObject({
      minAccountActivity: 'TYPICAL_BASIC',
      denyLocationSpoofing: ['HIGH_RISK_DEVICE', 'A_FUTURE_RISK'],
    });
    const text = (await runCli('allowlist', 'list')).stdout;
    expect(text).toContain('account >= TYPICAL_BASIC');
    expect(text).toContain('deny location HIGH_RISK_DEVICE|A_FUTURE_RISK');
    // another flag leaves them as they are
    expect((await add('--max-age', '300')).code).toBe(0);
    expect(await listed()).toMatchObject({ minAccountActivity: 'TYPICAL_BASIC' });
    const clear = await add('--no-min-account-activity', '--no-deny-location-spoofing');
    expect(clear.code).toBe(0);
    expect(await listed()).toMatchObject({ minAccountActivity: null, denyLocationSpoofing: [] });
    expect((await runCli('allowlist', 'list')).stdout).not.toMatch(/account >=|deny location/);
  });

  it.each([
    ['--min-account-activity', 'UNEVALUATED'],
    ['--min-account-activity', 'typical'],
    ['--deny-location-spoofing', ','],
    ['--deny-location-spoofing', 'HIGH RISK'],
    ['--deny-location-spoofing', 'A'.repeat(65)],
  ])('%s %j is a usage error and changes nothing', async (flag, value) => {
    const run = await add(flag, value);
    expect(run.code).toBe(2);
    expect(oneLine(run)).toContain(flag);
    expect(await listed()).toMatchObject({ minAccountActivity: null, denyLocationSpoofing: [] });
  });

  it('the new codes can be observed and enforced', async () => {
    const run = await add(
      '--min-account-activity',
      'unknown',
      '--observe',
      'gms_account_activity,gms_location_spoofing',
    );
    expect(run.code, run.stderr).toBe(0);
    expect((await runCli('allowlist', 'list')).stdout).toContain(
      'observe gms_account_activity|gms_location_spoofing',
    );
    expect((await add('--enforce', 'all', '--no-min-account-activity')).code).toBe(0);
  });
});

/** A minted token over a fresh nonce, saved to a file. */
async function minted(pkg: string, ...extra: string[]) {
  const nonce = b64(randomBytes(32));
  const run = await runCli('dev', 'mint', 'gms', '--package', pkg, '--nonce', nonce, ...extra);
  expect(run.code, run.stderr).toBe(0);
  const file = join(dir, `token-${randomBytes(4).toString('hex')}.txt`);
  writeFileSync(file, run.stdout.trim());
  return { file, nonce };
}

const check = (file: string, nonce: string) =>
  verifyFile([file, '--nonce', nonce, '--dev-roots', '--json'], dbEnv);

describe('dev mint gms: every verdict field a rule reads', () => {
  it('each flag lands in the verdict as Google lays it out, shown by verify-file', async () => {
    const { file, nonce } = await minted(
      PACKAGE,
      '--licensing',
      'UNLICENSED',
      '--play-protect',
      'no-data',
      '--apps-detected',
      'known_installed,UNKNOWN_OVERLAYS',
      '--device-activity',
      '3',
      '--account-activity',
      'typical-strong',
      '--location-spoofing',
      'SOME_FUTURE_RISK',
      '--legacy-verdict',
      'device',
    );
    const run = await check(file, nonce);
    expect(run.code, run.stderr).toBe(0);
    expect(run.json!.details).toMatchObject({
      googleTokenDetails: {
        appLicensingVerdict: 'UNLICENSED',
        playProtectVerdict: 'NO_DATA',
        appsDetected: ['KNOWN_INSTALLED', 'UNKNOWN_OVERLAYS'],
        deviceActivityLevel: 'LEVEL_3',
        accountActivityLevel: 'TYPICAL_STRONG',
        locationSpoofingRiskVerdict: ['SOME_FUTURE_RISK'],
        legacyDeviceIntegrityVerdicts: ['MEETS_BASIC_INTEGRITY', 'MEETS_DEVICE_INTEGRITY'],
      },
    });
  });

  it('none gives empty lists; without the flags the fields are absent (licensing LICENSED)', async () => {
    const empty = await minted(PACKAGE, '--apps-detected', 'none', '--location-spoofing', 'none');
    const run = await check(empty.file, empty.nonce);
    expect(run.json!.details).toMatchObject({
      googleTokenDetails: { appsDetected: [], locationSpoofingRiskVerdict: [] },
    });
    const plain = await minted(PACKAGE);
    const details = (await check(plain.file, plain.nonce)).json!.details as {
      googleTokenDetails: Record<string, unknown>;
    };
    expect(details.googleTokenDetails.appLicensingVerdict).toBe('LICENSED');
    for (const field of [
      'playProtectVerdict',
      'appsDetected',
      'deviceActivityLevel',
      'accountActivityLevel',
      'locationSpoofingRiskVerdict',
      'legacyDeviceIntegrityVerdicts',
    ])
      expect(details.googleTokenDetails).not.toHaveProperty(field);
  });

  // each rule a package sets, and a minted verdict that fails it (and nothing else)
  it.each([
    [['--require-licensed'], ['--licensing', 'UNLICENSED'], 'gms_not_licensed', 'not_licensed'],
    [
      ['--require-play-protect'],
      ['--play-protect', 'HIGH_RISK'],
      'gms_play_protect',
      'play_protect_risk',
    ],
    [
      ['--deny-app-access-risk', 'capturing'],
      ['--apps-detected', 'UNKNOWN_CAPTURING'],
      'gms_app_access_risk',
      'app_access_risk',
    ],
    [
      ['--max-device-activity', '2'],
      ['--device-activity', 'LEVEL_4'],
      'gms_device_activity',
      'device_activity_high',
    ],
    [
      ['--min-account-activity', 'typical_basic'],
      ['--account-activity', 'UNUSUAL'],
      'gms_account_activity',
      'account_activity_low',
    ],
    [
      ['--min-account-activity', 'typical_basic'],
      ['--account-activity', 'A_LEVEL_GOOGLE_ADDS'],
      'gms_account_activity',
      'account_activity_low',
    ],
    [
      ['--min-account-activity', 'typical_basic'],
      ['--account-activity', 'UNEVALUATED'],
      'gms_account_activity',
      'verdict_not_opted_in',
    ],
    [
      ['--deny-location-spoofing', 'HIGH_RISK_DEVICE'],
      ['--location-spoofing', 'LOW_RISK_NETWORK,HIGH_RISK_DEVICE'],
      'gms_location_spoofing',
      'location_spoofing_risk',
    ],
    [
      ['--deny-recall-bits', 'first'],
      ['--recall', 'first'],
      'gms_device_recalled',
      'device_recalled',
    ],
  ])('%j with a token minted %j: %s, hint %s', async (rule, mint, reason, hint) => {
    const pkg = `com.example.rule${randomBytes(3).toString('hex')}`;
    expect((await runCli('allowlist', 'add', 'android', pkg, '--without-keys', ...rule)).code).toBe(
      0,
    );
    const { file, nonce } = await minted(pkg, ...mint);
    const run = await check(file, nonce);
    expect(run.code).toBe(1);
    expect(run.json).toMatchObject({ valid: false, reason });
    expect(hintCodes(run)).toEqual([hint]);
  });

  it('verify-file names the Play dialog of a rejection the user can fix (facts.remediation)', async () => {
    const pkg = `com.example.dialog${randomBytes(3).toString('hex')}`;
    await runCli('allowlist', 'add', 'android', pkg, '--without-keys', '--require-licensed');
    const unlicensed = await minted(pkg, '--licensing', 'UNLICENSED');
    const run = await check(unlicensed.file, unlicensed.nonce);
    expect(run.json).toMatchObject({
      reason: 'gms_not_licensed',
      facts: { remediation: { dialog: 'GET_LICENSED', typeCode: 1 } },
    });
    const text = await verifyFile(
      [unlicensed.file, '--nonce', unlicensed.nonce, '--dev-roots'],
      dbEnv,
    );
    expect(text.stdout).toContain('Play dialog GET_LICENSED (showDialog type code 1)');
    // not evaluated: no dialog licenses it
    const unevaluated = await minted(pkg, '--licensing', 'UNEVALUATED');
    const none = await check(unevaluated.file, unevaluated.nonce);
    expect(none.json).toMatchObject({ reason: 'gms_not_licensed' });
    expect(none.json!.facts).not.toHaveProperty('remediation');
  });

  it.each([
    ['--licensing', 'not a value'],
    ['--account-activity', '1st'],
    ['--device-activity', 'LEVEL 9'],
    ['--apps-detected', ','],
    ['--location-spoofing', 'A'.repeat(65)],
    ['--legacy-verdict', 'meets device'],
  ])('%s %j is a usage error', async (flag, value) => {
    const run = await runCli(
      'dev',
      'mint',
      'gms',
      '--package',
      PACKAGE,
      '--nonce',
      b64(randomBytes(32)),
      flag,
      value,
    );
    expect(run.code).toBe(2);
    expect(oneLine(run)).toContain(flag);
  });
});

describe('keys --rejection-details', () => {
  it('create sets it, list shows it, update turns it off and on', async () => {
    const created = await runCli(
      'keys',
      'create',
      '--name',
      'detailed',
      '--rejection-details',
      '--json',
    );
    expect(created.code, created.stderr).toBe(0);
    const key = JSON.parse(created.stdout) as { id: string; rejectionDetails: boolean };
    expect(key.rejectionDetails).toBe(true);
    const plain = JSON.parse(
      (await runCli('keys', 'create', '--name', 'plain', '--json')).stdout,
    ) as { id: string; rejectionDetails: boolean };
    expect(plain.rejectionDetails).toBe(false);

    const list = async () =>
      (
        JSON.parse((await runCli('keys', 'list', '--json')).stdout) as {
          id: string;
          rejectionDetails: boolean;
        }[]
      ).find((k) => k.id === key.id)?.rejectionDetails;
    expect(await list()).toBe(true);
    expect((await runCli('keys', 'list')).stdout).toContain('REJECTION DETAILS');

    const off = await runCli('keys', 'update', key.id, '--rejection-details', 'off', '--json');
    expect(off.code, off.stderr).toBe(0);
    expect(JSON.parse(off.stdout)).toMatchObject({ rejectionDetails: false, changed: true });
    expect(await list()).toBe(false);
    const again = await runCli('keys', 'update', key.id, '--rejection-details', 'off');
    expect(again.stdout).toContain('rejection details were already off');
    expect((await runCli('keys', 'update', key.id, '--rejection-details', 'on')).code).toBe(0);
    expect(await list()).toBe(true);
    // each change is audited with the setting before and after
    const audit = (await runCli('audit', 'list', '--json')).stdout;
    expect(audit).toMatch(/"rejectionDetails": ?false/);
    expect(audit).toMatch(/"rejectionDetails": ?true/);
  });

  it('a value other than on or off is a usage error; an unknown key is a negative answer', async () => {
    const bad = await runCli('keys', 'update', '0h3k5x9q2m7c1b4n', '--rejection-details', 'yes');
    expect(bad.code).toBe(2);
    expect(oneLine(bad)).toContain('--rejection-details takes on or off');
    const unknown = await runCli('keys', 'update', '0h3k5x9q2m7c1b4n', '--rejection-details', 'on');
    expect(unknown.code).toBe(1);
    expect(oneLine(unknown)).toContain('no API key with id');
  });
});
