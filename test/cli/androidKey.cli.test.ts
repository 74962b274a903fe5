/**
 * The CLI side of android-key: `verify-file` explains every real chain (no database, with
 * --package and the policy flags) and names the common mistakes; `token wrap android-key` wraps a
 * captured chain; `allowlist add android --key-attestation ...` shows in `allowlist list`;
 * `dev mint android-key` mints tokens (and their deny paths) that test keys accept;
 * `android revocations update` replaces the stored status list.
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, vi } from 'vitest';
import { shippedRevocations } from '../../src/core/androidKey/revocationList.js';
import {
  lockedAndVerified,
  loadAndroidVectors,
  vectorPackage,
  vectorToken,
} from '../support/androidVectors.js';
import {
  ANDROID_PACKAGE,
  androidRegistration,
  createAndroidTestCa,
  type AndroidTestCa,
} from '../support/androidFactory.js';
import { runCli } from '../support/cli.js';
import { hintCodes, verifyFile } from '../support/verifyFileTokens.js';
import { it } from '../support/fixtures.js';

vi.setConfig({ testTimeout: 180_000, hookTimeout: 180_000 });

const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');
let dir: string;
let dbEnv: Record<string, string>;
let ca: AndroidTestCa;
let caFile: string;

it.beforeAll(async ({ cliDatabase, tempDir }) => {
  dir = tempDir;
  ca = await createAndroidTestCa();
  caFile = join(dir, 'root.pem');
  writeFileSync(caFile, ca.rootPem);
  dbEnv = cliDatabase.env;
});
function write(name: string, bytes: Uint8Array | string): string {
  const path = join(dir, name);
  writeFileSync(path, bytes);
  return path;
}

const vectors = loadAndroidVectors();

describe('verify-file explains each real chain (no database)', () => {
  it.each(vectors.map((v) => [v.id, v] as const))('%s', async (id, v) => {
    const nonce = randomBytes(32);
    const file = write(`${id}.cbor`, vectorToken(v, nonce));
    const args = [
      file,
      '--nonce',
      b64(nonce),
      '--challenge',
      v.challenge.base64,
      '--at',
      v.verifyAt,
      '--package',
      vectorPackage(v),
      '--json',
    ];
    const run = await verifyFile(args, { DATABASE_URL: undefined });
    const strict = run.json!;
    expect(strict.source).toBe('flags');
    expect(strict.checks.map((c) => c.id)).toContain('android.chain');
    if (v.expected.verdictAttestationRules === 'reject') {
      expect(strict.reason).toBe('android_chain_invalid');
      // the software chains are named as such
      if (id.includes('software'))
        expect(hintCodes(run).some((c) => c === 'software_key' || c === 'emulator')).toBe(true);
      else if (id.includes('unknown-root')) expect(hintCodes(run)).toContain('unknown_root');
      else expect(strict.detail).toMatch(/signature does not verify/);
      return;
    }
    if (id.includes('mldsa')) {
      expect(strict.reason).toBe('android_key_unsupported');
      return;
    }
    // two factory chains whose device clock lags their own patch level by a year: at their
    // capture time that patch level is in the future (test/core/androidKey/vectors.test.ts runs
    // them in their patch month)
    if (id === 'google-aka-tee-ec' || id === 'google-keyattestation-pixel3-tee-ec') {
      expect(strict.reason).toBe('android_patch_level_future');
      return;
    }
    if (lockedAndVerified(v)) {
      expect(strict.valid).toBe(true);
      expect(run.code).toBe(0);
      return;
    }
    // an unlocked test device: named, and valid with --allow-unlocked
    expect(strict.reason).toBe('android_boot_state_insufficient');
    expect(hintCodes(run)).toContain('device_unlocked');
    const allowed = await verifyFile([...args, '--allow-unlocked'], { DATABASE_URL: undefined });
    expect(allowed.json!.valid).toBe(true);
  });

  it('a wrong challenge derivation is named; --revocations and policy flags apply', async () => {
    const nonce = randomBytes(32);
    // the device passed the nonce itself instead of SHA-256(nonce)
    const made = await androidRegistration(ca, { nonce, description: { challenge: nonce } });
    const file = write('raw-challenge.cbor', made.token);
    const base = [file, '--nonce', b64(nonce), '--package', ANDROID_PACKAGE, '--json'];
    const env = { DATABASE_URL: undefined, ATTEST_ANDROID_ROOT_CA: caFile };
    const run = await verifyFile(base, env);
    expect(run.json!.reason).toBe('android_challenge_mismatch');
    expect(hintCodes(run)).toContain('challenge_derivation');

    const good = await androidRegistration(ca, { nonce, serialHex: '7777' });
    const goodFile = write('good.cbor', good.token);
    const ok = [goodFile, '--nonce', b64(nonce), '--package', ANDROID_PACKAGE, '--json'];
    expect((await verifyFile(ok, env)).json!.valid).toBe(true);
    const strongbox = await verifyFile([...ok, '--min-security-level', 'strongbox'], env);
    expect(strongbox.json!.reason).toBe('android_security_level_insufficient');
    const list = write(
      'status.json',
      JSON.stringify({ entries: { '7777': { status: 'REVOKED', reason: 'KEY_COMPROMISE' } } }),
    );
    const revoked = await verifyFile([...ok, '--revocations', list], env);
    expect(revoked.json!.reason).toBe('android_chain_revoked');
    expect(hintCodes(revoked)).toContain('certificate_revoked');
    const bad = await verifyFile([...ok, '--boot-key', 'zz'], env);
    expect(bad.code).toBe(2);
    const stray = await verifyFile([goodFile, '--allow-unlocked'], env);
    expect(stray.code).toBe(2);
    expect(stray.stderr).toMatch(/need --package/);
  });
});

describe('token wrap android-key', () => {
  it('wraps a PEM chain file, or DER files, into the token the device would send', async () => {
    const v = vectors.find((x) => x.id === 'google-keyattestation-pixel9a-tee-ec-2026-root')!;
    const pem = v.chain
      .map(
        (c) =>
          `-----BEGIN CERTIFICATE-----\n${c.match(/.{1,64}/g)!.join('\n')}\n-----END CERTIFICATE-----\n`,
      )
      .join('');
    const pemFile = write('chain.pem', pem);
    const ders = v.chain.map((c, i) => write(`c${i}.der`, Buffer.from(c, 'base64')));
    const nonce = randomBytes(32);
    const fromPem = await runCli(
      'token',
      'wrap',
      'android-key',
      '--package',
      vectorPackage(v),
      '--chain',
      pemFile,
      '--nonce',
      b64(nonce),
    );
    const fromDer = await runCli(
      'token',
      'wrap',
      'android-key',
      '--package',
      vectorPackage(v),
      '--chain',
      ...ders,
      '--nonce',
      b64(nonce),
    );
    expect(fromPem.code).toBe(0);
    expect(fromPem.stdout).toBe(fromDer.stdout);
    expect(fromPem.stdout.trim()).toBe(b64(vectorToken(v, nonce)));
    const file = write('wrapped.b64', fromPem.stdout);
    const run = await verifyFile(
      [
        file,
        '--nonce',
        b64(nonce),
        '--challenge',
        v.challenge.base64,
        '--at',
        v.verifyAt,
        '--package',
        vectorPackage(v),
        '--json',
      ],
      { DATABASE_URL: undefined },
    );
    expect(run.json!.valid).toBe(true);
    const garbage = await runCli(
      'token',
      'wrap',
      'android-key',
      '--package',
      'com.x.y',
      '--chain',
      write('junk.der', 'junk'),
      '--nonce',
      b64(nonce),
    );
    expect(garbage.code).toBe(2);
  });
});

describe('allowlist, dev mint and the status list (database)', () => {
  it('allowlist add android --key-attestation: stored, listed, changed flag by flag', async () => {
    const pkg = 'com.example.keyatt';
    const add = await runCli(
      'allowlist',
      'add',
      'android',
      pkg,
      '--key-attestation',
      '--min-security-level',
      'strongbox',
      '--boot-key',
      'ab'.repeat(32),
      '--max-patch-age',
      '1y',
    );
    expect(add.code).toBe(0);
    const listed = async () =>
      (
        JSON.parse((await runCli('allowlist', 'list', '--json')).stdout) as {
          android: Record<string, unknown>[];
        }
      ).android.find((p) => p.packageName === pkg);
    expect(await listed()).toMatchObject({
      keyAttestation: true,
      minSecurityLevel: 'StrongBox',
      allowUnlocked: false,
      bootKeys: ['ab'.repeat(32)],
      maxPatchAgeMonths: 12,
    });
    expect((await runCli('allowlist', 'list')).stdout).toMatch(
      /key attestation: min strongbox, 1 boot key\(s\), patch <= 12 months/,
    );
    await runCli('allowlist', 'add', 'android', pkg, '--allow-unlocked', '--no-max-patch-age');
    expect(await listed()).toMatchObject({
      allowUnlocked: true,
      maxPatchAgeMonths: null,
      minSecurityLevel: 'StrongBox',
    });
    expect((await runCli('allowlist', 'add', 'android', pkg, '--max-patch-age', '12')).code).toBe(
      2,
    );
    const audit = await runCli('audit', 'list', '--json');
    expect(audit.stdout).toMatch(/"allowUnlocked": ?true/);
  });

  it('dev mint android-key: a registration and an assertion pass for test keys; each deny switch gets its reason', async () => {
    expect((await runCli('dev', 'init')).code).toBe(0);
    const pkg = 'com.example.devmint';
    expect(
      (
        await runCli(
          'allowlist',
          'add',
          'android',
          pkg,
          '--key-attestation',
          '--max-patch-age',
          '12m',
        )
      ).code,
    ).toBe(0);
    const mintAndCheck = async (device: string, extra: string[], packageFlag = true) => {
      const nonce = randomBytes(32);
      const minted = await runCli(
        'dev',
        'mint',
        'android-key',
        ...(packageFlag ? ['--package', pkg] : []),
        '--device',
        join(dir, device),
        '--nonce',
        b64(nonce),
        ...extra,
      );
      expect(minted.code).toBe(0);
      const file = write(`${device}.b64`, minted.stdout);
      return verifyFile([file, '--nonce', b64(nonce), '--dev-roots', '--json'], dbEnv);
    };
    const registration = await mintAndCheck('d1.json', []);
    expect(registration.json!.valid).toBe(true);
    // a live key refuses what only the development CA vouches for
    const nonce = randomBytes(32);
    const live = await runCli(
      'dev',
      'mint',
      'android-key',
      '--device',
      join(dir, 'd1.json'),
      '--nonce',
      b64(nonce),
    );
    const liveRun = await verifyFile(
      [write('live.b64', live.stdout), '--nonce', b64(nonce), '--json'],
      dbEnv,
    );
    expect(liveRun.json!.valid).toBe(false);
    for (const [flag, reason] of [
      ['--unlocked', 'android_boot_state_insufficient'],
      ['--software', 'android_security_level_insufficient'],
      ['--wrong-challenge', 'android_challenge_mismatch'],
      ['--stale-patch', 'android_patch_level_stale'],
      ['--revoked', 'android_chain_revoked'],
      ['--claim-strongbox', 'android_security_level_mismatch'],
      ['--future-patch', 'android_patch_level_future'],
      ['--imported', 'android_key_not_generated'],
      ['--subject-revoked', 'android_chain_revoked'],
    ] as const) {
      const run = await mintAndCheck(`deny${flag}.json`, [flag]);
      expect(run.json!.reason, flag).toBe(reason);
    }
    // the 2026 fields a device can carry: minted, verified, shown
    const extras = await mintAndCheck('extras.json', [
      '--security-level',
      'strongbox',
      '--attestation-version',
      '500',
      '--ml-dsa-variant',
      '2',
      '--usage-count-limit',
      '7',
      '--trusted-confirmation',
      '--module-hash',
      'a1b2c3',
      '--unknown-tag',
      '725',
      '--unknown-tag',
      '726',
      '--provisioning-info',
      '3',
    ]);
    expect(extras.json!.valid).toBe(true);
    expect(extras.json!.details).toMatchObject({
      androidKeyDetails: {
        securityLevel: 'StrongBox',
        attestationVersion: 500,
        mlDsaVariant: 2,
        usageCountLimit: 7,
        trustedConfirmationRequired: true,
        moduleHash: Buffer.from('a1b2c3', 'hex').toString('base64'),
        unknownTags: [725, 726],
      },
    });
    expect(JSON.stringify(extras.json)).toContain('"certificatesIssued":3');
  });

  it('dev mint android-key --self-signed-boot and --patch-level rehearse --boot-key and --max-patch-age', async () => {
    expect((await runCli('dev', 'init')).code).toBe(0);
    const pkg = 'com.example.rehearse';
    const bootKey = 'cd'.repeat(32);
    expect(
      (
        await runCli(
          'allowlist',
          'add',
          'android',
          pkg,
          '--key-attestation',
          '--max-patch-age',
          '12m',
        )
      ).code,
    ).toBe(0);
    const month = (ago: number) => {
      const d = new Date();
      d.setUTCMonth(d.getUTCMonth() - ago, 1);
      return String(d.getUTCFullYear() * 100 + d.getUTCMonth() + 1);
    };
    const mint = async (device: string, ...extra: string[]) => {
      const nonce = randomBytes(32);
      const minted = await runCli(
        'dev',
        'mint',
        'android-key',
        '--package',
        pkg,
        '--device',
        join(dir, device),
        '--nonce',
        b64(nonce),
        ...extra,
      );
      expect(minted.code, minted.stderr).toBe(0);
      const file = write(`${device}.b64`, minted.stdout);
      return verifyFile([file, '--nonce', b64(nonce), '--dev-roots', '--json'], dbEnv);
    };
    // a self-signed OS the package does not trust, then trusts
    const selfSigned = await mint('self1.json', '--self-signed-boot', bootKey);
    expect(selfSigned.json!.reason).toBe('android_boot_state_insufficient');
    await runCli('allowlist', 'add', 'android', pkg, '--boot-key', bootKey);
    const trusted = await mint('self2.json', '--self-signed-boot', bootKey);
    expect(trusted.json!.valid, JSON.stringify(trusted.json)).toBe(true);
    // the patch level a month inside the limit passes, one beyond it does not
    expect((await mint('patch1.json', '--patch-level', month(11))).json!.valid).toBe(true);
    expect((await mint('patch2.json', '--patch-level', month(14))).json!.reason).toBe(
      'android_patch_level_stale',
    );
    for (const extra of [
      ['--self-signed-boot', 'zz'],
      ['--patch-level', '202613'],
      ['--patch-level', '1'],
      ['--unlocked', '--self-signed-boot', bootKey],
      ['--stale-patch', '--patch-level', month(1)],
    ]) {
      const run = await runCli(
        'dev',
        'mint',
        'android-key',
        '--package',
        pkg,
        '--device',
        join(dir, `bad-${randomBytes(3).toString('hex')}.json`),
        '--nonce',
        b64(randomBytes(32)),
        ...extra,
      );
      expect({ extra, code: run.code }).toEqual({ extra, code: 2 });
    }
  });

  it('android revocations update FILE replaces the stored list; show says where it came from', async () => {
    const list = write(
      'update.json',
      JSON.stringify({ entries: { abc: { status: 'SUSPENDED' } } }),
    );
    const update = await runCli('android', 'revocations', 'update', list, '--json');
    expect(update.code).toBe(0);
    expect(JSON.parse(update.stdout)).toEqual({ entries: 1, stored: true });
    const show = JSON.parse((await runCli('android', 'revocations', 'show', '--json')).stdout) as {
      entries: number;
      source: string;
    };
    expect(show).toMatchObject({ entries: 1, source: `file ${list}` });
    // an older list does not replace a newer one
    const older = await runCli(
      'android',
      'revocations',
      'update',
      list,
      '--taken-at',
      '2020-01-01T00:00:00Z',
      '--json',
    );
    expect(JSON.parse(older.stdout)).toEqual({ entries: 1, stored: false });
    const bad = await runCli(
      'android',
      'revocations',
      'update',
      write('bad.json', '{"entries":{"xyz":{}}}'),
    );
    expect(bad.code).toBe(2);
    expect(shippedRevocations().list.size).toBe(1650);
  });
});
