/**
 * The leaked-keybox defence from the CLI: `allowlist add android --max-keys-per-issuer` is
 * stored, listed, audited and cleared with its `--no-` form, bad values are one usage line (exit
 * 2); `attest stats` shows the issuing certificates nearest their package's limit (live keys only);
 * `attest allowlist android-issuers block|unblock|list` keeps the blocklist, audited.
 */
import { describe, expect, vi } from 'vitest';
import { openDatabase } from '../../src/db/client.js';
import type { DatabaseHandle } from '../../src/db/database.js';
import { createIssuerVelocityRepository } from '../../src/db/issuerVelocity.js';
import { windowStartOf } from '../../src/core/deviceVelocity.js';
import { runCli } from '../support/cli.js';
import { postgresBackend, type TestDatabase } from '../support/databases.js';
import { it } from '../support/fixtures.js';

vi.setConfig({ testTimeout: 120_000, hookTimeout: 120_000 });

const PKG = 'com.example.keybox';
let pg: TestDatabase | undefined;

it.beforeAll(async ({ cliDatabase }) => {
  pg = cliDatabase.name === 'postgres' ? cliDatabase : undefined;
});

describe('allowlist add android --max-keys-per-issuer', () => {
  it('stored, listed and audited; --no- clears it; a bad value is one usage line', async () => {
    const add = await runCli(
      'allowlist',
      'add',
      'android',
      PKG,
      '--key-attestation',
      '--max-keys-per-issuer',
      '3/1h',
    );
    expect(add.code, add.stderr).toBe(0);
    const list = await runCli('allowlist', 'list');
    expect(list.stdout).toContain('3/1h keys per issuer');
    const audit = await runCli('audit', 'list', '--json');
    expect(audit.stdout).toMatch(/"maxKeysPerIssuer": "3\/3600"/);

    const bad = await runCli('allowlist', 'add', 'android', PKG, '--max-keys-per-issuer', '3');
    expect(bad.code).toBe(2);
    expect(bad.stderr.trim().split('\n')).toHaveLength(1);
    expect(bad.stderr).toMatch(/--max-keys-per-issuer takes N\/PERIOD/);

    expect(
      (await runCli('allowlist', 'add', 'android', PKG, '--no-max-keys-per-issuer')).code,
    ).toBe(0);
    expect((await runCli('allowlist', 'list')).stdout).not.toContain('keys per issuer');
  });

  it.skipIf(!postgresBackend())(
    'attest stats lists the issuers nearest the limit, live keys unless --mode says otherwise (PostgreSQL: counts seeded beside the CLI)',
    async () => {
      await runCli('allowlist', 'add', 'android', PKG, '--max-keys-per-issuer', '4/1d');
      const handle: DatabaseHandle = await openDatabase({
        url: pg!.url,
        dataDir: '',
        role: 'server',
        poolSize: 2,
      });
      try {
        const repo = createIssuerVelocityRepository(handle.db);
        const now = new Date();
        const base = {
          packageName: PKG,
          windowStart: windowStartOf(now, 86_400),
          periodSeconds: 86_400,
          at: now,
        };
        const count = (serial: string, mode: 'live' | 'test', n: number) =>
          Promise.all(
            Array.from({ length: n }, () =>
              repo.count({
                ...base,
                issuer: Buffer.from(serial.padStart(64, '0'), 'hex'),
                serial,
                subject: `CN=keybox ${serial}`,
                mode,
              }),
            ),
          );
        await count('a1', 'live', 3);
        await count('b2', 'live', 1);
        await count('c3', 'test', 4);
        const json = await runCli('stats', '--json');
        expect(json.code, json.stderr).toBe(0);
        const { issuers } = JSON.parse(json.stdout) as {
          issuers: { serial: string; count: number; max: number }[];
        };
        expect(issuers.map((i) => [i.serial, i.count, i.max])).toEqual([
          ['a1', 3, 4],
          ['b2', 1, 4],
        ]);
        const text = await runCli('stats');
        expect(text.stdout).toMatch(/issuing certificates nearest --max-keys-per-issuer/);
        expect(text.stdout).toMatch(/a1\s+3\/4\/1d/);
        expect(text.stdout).not.toContain('c3');
        // --mode test: the rehearsal's own issuers, apart from live ones; all: both, with a MODE column
        const test = JSON.parse((await runCli('stats', '--mode', 'test', '--json')).stdout) as {
          issuers: { serial: string; count: number; mode: string }[];
        };
        expect(test.issuers.map((i) => [i.serial, i.count, i.mode])).toEqual([['c3', 4, 'test']]);
        const all = await runCli('stats', '--mode', 'all');
        expect(all.code, all.stderr).toBe(0);
        expect(all.stdout).toMatch(/NEW KEYS\/LIMIT\s+MODE/);
        expect(all.stdout).toMatch(/c3\s+4\/4\/1d\s+test/);
        expect(all.stdout).toMatch(/a1\s+3\/4\/1d\s+live/);
        expect(all.stdout).toMatch(/current windows, live and test keys/);
      } finally {
        await handle.close();
      }
    },
  );

  it('android-issuers block, list, unblock: normalized serials, audited, bad serials are usage errors', async () => {
    const bad = await runCli('allowlist', 'android-issuers', 'block', 'not-hex');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/is not a certificate serial/);
    const block = await runCli('allowlist', 'android-issuers', 'block', '00:AB:CD');
    expect(block.code, block.stderr).toBe(0);
    expect(block.stdout).toBe('abcd: blocked\n');
    expect((await runCli('allowlist', 'android-issuers', 'block', 'abcd')).stdout).toBe(
      'abcd: already blocked\n',
    );
    const list = await runCli('allowlist', 'android-issuers', 'list', '--json');
    expect((JSON.parse(list.stdout) as { serial: string }[]).map((b) => b.serial)).toEqual([
      'abcd',
    ]);
    const unblock = await runCli('allowlist', 'android-issuers', 'unblock', 'ABCD', '--json');
    expect(JSON.parse(unblock.stdout)).toEqual({ serial: 'abcd', changed: true });
    const audit = await runCli('audit', 'list', '--json');
    expect(audit.stdout).toContain('"android_issuers.block"');
    expect(audit.stdout).toContain('"android_issuers.unblock"');
  });
});
