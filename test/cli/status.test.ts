/**
 * `attest status`: which database (a URL without its password, or the data dir), the schema
 * state, the master key id, a server running on the data dir, test keys on or off; exit 3 when
 * the database cannot be reached, with the report printed all the same. `--check` reaches the
 * upstreams (fakes on 127.0.0.1) with the stored credentials, directly and through the server.
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect } from 'vitest';
import type { StatusReport } from '../../src/cli/commands/status.js';
import { loadConfig } from '../../src/config.js';
import { createRevocationRepository } from '../../src/db/androidRevocations.js';
import { startServer } from '../../src/server/start.js';
import { oneLine, runCli } from '../support/cli.js';
import { postgresBackend } from '../support/databases.js';
import { TEST_MASTER_KEY_ENV } from '../support/secrets.js';
import { captureLogger } from '../support/service.js';
import { startFakeAppleReceipts } from '../support/fakeAppleReceipts.js';
import { it } from '../support/fixtures.js';

const VARS = [
  'ATTEST_DATA_DIR',
  'DATABASE_URL',
  'ATTEST_TEST_KEYS',
  'ATTEST_MASTER_KEY',
  'ATTEST_DB_CONNECT_TIMEOUT',
  'ATTEST_ANDROID_REVOCATION_URL',
  'ATTEST_GOOGLE_OAUTH_URL',
  'ATTEST_GOOGLE_PLAY_INTEGRITY_URL',
  'ATTEST_APPLE_RECEIPT_URL_DEVELOPMENT',
  'ATTEST_APPLE_RECEIPT_URL_PRODUCTION',
];

describe('attest status', { timeout: 120_000 }, () => {
  let dir: string;
  const saved: Record<string, string | undefined> = {};
  it.beforeAll(({ tempDir }) => {
    dir = tempDir;
    for (const v of VARS) saved[v] = process.env[v];
  });
  afterEach(() => {
    for (const v of VARS) {
      if (saved[v] === undefined) delete process.env[v];
      else process.env[v] = saved[v];
    }
  });

  const status = async () => {
    const run = await runCli('status', '--json');
    return { ...run, report: JSON.parse(run.stdout) as StatusReport };
  };

  it('embedded: no database yet, then current with its master key; a running server by pid and address', async () => {
    delete process.env.DATABASE_URL;
    process.env.ATTEST_DATA_DIR = join(dir, 'data');
    const before = await status();
    expect(before.code).toBe(0);
    expect(before.report).toMatchObject({
      database: { kind: 'embedded', where: join(dir, 'data'), reachable: false },
      schema: null,
      server: null,
      testKeys: 'on',
    });
    expect(before.report.database.error).toContain('no database yet');

    expect((await runCli('db', 'migrate')).code).toBe(0);
    process.env.ATTEST_TEST_KEYS = 'off';
    const after = await status();
    expect(after.code).toBe(0);
    expect(after.report.database.reachable).toBe(true);
    expect(after.report.schema).toMatchObject({ pending: 0, state: 'current' });
    expect(after.report.masterKeyId).toMatch(/^[0-9a-f]{16}$/);
    expect(after.report.testKeys).toBe('off');
    // db migrate stores no status list (serve does) and there are no receipts yet
    expect(after.report.revocationList).toBeNull();
    expect(after.report.receipts).toMatchObject({ teams: 0, receipts: 0 });

    const server = await startServer(
      {
        ...loadConfig({}, {}),
        dataDir: join(dir, 'data'),
        port: 0,
        host: '127.0.0.1',
        // as the CLI's environment says: no refresh from Google in a test
        androidRevocationUrl: null,
      },
      captureLogger().logger,
      { migrate: true },
    );
    try {
      const serving = await status();
      expect(serving.code).toBe(0);
      expect(serving.report.server).toMatchObject({
        pid: process.pid,
        address: expect.stringMatching(/admin\.sock$/),
      });
      expect(serving.report.masterKeyId).toBe(after.report.masterKeyId);
      // serve stored the shipped status list; the tests' environment never refreshes it
      expect(serving.report.revocationList).toMatchObject({
        source: expect.stringMatching(/^snapshot \d{4}-\d{2}-\d{2}$/),
        refreshFrom: null,
        entries: expect.any(Number),
      });
      expect(serving.report.revocationList!.ageSeconds).toBeGreaterThan(0);
      expect(serving.report.receipts).toMatchObject({ teams: 0, receipts: 0, due: 0 });
      const text = await runCli('status');
      expect(text.stdout).toMatch(new RegExp(`^server +.*\\b${process.pid}\\b`, 'm'));
      expect(text.stdout).toMatch(/^test keys +off/m);
      expect(text.stdout).toMatch(
        /^revocations +snapshot \S+, taken \d+ \w+ ago, \d+ entries; not refreshed \(ATTEST_ANDROID_REVOCATION_URL=off\)$/m,
      );
      expect(text.stdout).toMatch(
        /^receipts +0 stored, 0 due, 0 backing off; not refreshed: no DeviceCheck key/m,
      );
      // a failed refresh shows here, not only in the server's log
      await createRevocationRepository(server.database.db).recordRefresh(
        'https://android.googleapis.com/attestation/status answered HTTP 503',
      );
      const failed = await status();
      expect(failed.report.revocationList!.lastRefreshError).toEqual({
        message: 'https://android.googleapis.com/attestation/status answered HTTP 503',
        at: expect.any(String),
      });
      expect((await runCli('status')).stdout).toMatch(
        /^revocations .*; LAST REFRESH FAILED at \S+: https:\/\/android\.googleapis\.com\/attestation\/status answered HTTP 503$/m,
      );
    } finally {
      await server.close();
    }
  });

  it('embedded: a missing master key file is said, and exits 1; restored, exit 0', async ({
    dataDir,
  }) => {
    delete process.env.DATABASE_URL;
    process.env.ATTEST_DATA_DIR = dataDir.path;
    // something sealed: an Apple DeviceCheck key would do; the master key check row is enough
    const ok = await status();
    expect(ok.code).toBe(0);
    expect(ok.report.masterKeyProblem).toBeNull();
    const file = join(dataDir.path, 'master.key');
    renameSync(file, `${file}.away`);
    const lost = await status();
    expect(lost.code).toBe(1);
    expect(lost.report.masterKeyId).toBe(ok.report.masterKeyId);
    expect(lost.report.masterKeyProblem).toContain(`${file} is missing`);
    expect(oneLine(lost)).toContain(`${file} is missing`);
    expect((await runCli('status')).stdout).toMatch(/^master key +[0-9a-f]{16} \(PROBLEM: /m);
    // another key in its place
    writeFileSync(file, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });
    const other = await status();
    expect(other.code).toBe(1);
    expect(other.report.masterKeyProblem).toMatch(/holds key [0-9a-f]{16}$/);
    renameSync(`${file}.away`, file);
    expect((await status()).code).toBe(0);
  });

  it("--check reaches Google's status list: ok, or failing with the reason and exit 1", async () => {
    delete process.env.DATABASE_URL;
    process.env.ATTEST_DATA_DIR = join(dir, 'check');
    let answer = { status: 200, text: JSON.stringify({ entries: { abc: { status: 'REVOKED' } } }) };
    const google = createServer((_req, res) => {
      // no kept-alive socket: the last step finds nobody listening, not a stale connection
      res.writeHead(answer.status, { 'Content-Type': 'application/json', Connection: 'close' });
      res.end(answer.text);
    });
    await new Promise<void>((r) => google.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(google.address() as AddressInfo).port}/attestation/status`;
    process.env.ATTEST_ANDROID_REVOCATION_URL = url;
    const check = async () => {
      const run = await runCli('status', '--check', '--json');
      return { ...run, report: JSON.parse(run.stdout) as StatusReport };
    };
    try {
      const ok = await check();
      expect(ok.code, ok.stderr).toBe(0);
      expect(ok.report.checks).toEqual([
        { upstream: 'android-status-list', target: url, state: 'ok', detail: '1 entries' },
        expect.objectContaining({ upstream: 'play-integrity', state: 'not checked' }),
        expect.objectContaining({ upstream: 'apple-receipts', state: 'not checked' }),
      ]);
      answer = { status: 503, text: 'unavailable' };
      const down = await check();
      expect(down.code).toBe(1);
      expect(down.report.checks![0]).toMatchObject({ state: 'failing', detail: 'HTTP 503' });
      expect(oneLine(down)).toBe(`attest: android-status-list ${url}: HTTP 503`);
      answer = { status: 200, text: 'not json' };
      expect((await check()).report.checks![0]!.detail).toMatch(/^not a status list/);
      // without --check nothing is reached
      const plain = await status();
      expect(plain.report.checks).toBeUndefined();
    } finally {
      await new Promise<void>((r) => google.close(() => r()));
    }
    // nobody listening
    const refused = await check();
    expect(refused.code).toBe(1);
    expect(refused.report.checks![0]).toMatchObject({ state: 'failing', detail: 'ECONNREFUSED' });
  });

  it('--check with stored credentials: Play per service account, Apple per DeviceCheck key, directly and through the running server; a refusal exits 1', async ({
    dataDir,
    fakeGoogle,
  }) => {
    delete process.env.DATABASE_URL;
    process.env.ATTEST_DATA_DIR = dataDir.path;
    process.env.ATTEST_ANDROID_REVOCATION_URL = 'off';
    const { fake: google, serviceAccount: sa } = fakeGoogle;
    const deviceCheck = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const appleKeys = new Map([['ABCDE12345/KEY1234567', deviceCheck.publicKey]]);
    const apple = await startFakeAppleReceipts({ keys: appleKeys, now: () => new Date() });
    process.env.ATTEST_GOOGLE_OAUTH_URL = google.oauthUrl;
    process.env.ATTEST_GOOGLE_PLAY_INTEGRITY_URL = google.playIntegrityUrl;
    process.env.ATTEST_APPLE_RECEIPT_URL_DEVELOPMENT = apple.developmentUrl;
    process.env.ATTEST_APPLE_RECEIPT_URL_PRODUCTION = apple.productionUrl;
    const check = async () => {
      const run = await runCli('status', '--check', '--json');
      return { ...run, report: JSON.parse(run.stdout) as StatusReport };
    };
    try {
      // nothing sealed yet: nothing to reach
      const empty = await check();
      expect(empty.code).toBe(0);
      expect(empty.report.checks!.map((c) => c.state)).toEqual(['not checked', 'not checked']);
      const saFile = join(dir, 'sa.json');
      writeFileSync(saFile, sa.json, { mode: 0o600 });
      const p8 = join(dir, 'AuthKey_KEY1234567.p8');
      const pem = deviceCheck.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
      writeFileSync(p8, pem, { mode: 0o600 });
      const addPlay = ['allowlist', 'add', 'android', 'com.example.checked'];
      expect((await runCli(...addPlay, '--service-account-file', saFile)).code).toBe(0);
      const addApple = ['apple', 'credentials', 'add', 'ABCDE12345', '--key-id', 'KEY1234567'];
      expect((await runCli(...addApple, '--private-key-file', p8)).code).toBe(0);

      const ok = await check();
      expect(ok.code, ok.stderr).toBe(0);
      expect(ok.report.checks).toEqual([
        {
          upstream: 'play-integrity',
          target: `${google.playIntegrityUrl}/v1/com.example.checked:decodeIntegrityToken`,
          credential: sa.account.clientEmail,
          state: 'ok',
          detail: expect.stringContaining('HTTP 400 INVALID_ARGUMENT'),
        },
        expect.objectContaining({ target: apple.productionUrl, state: 'ok' }),
        expect.objectContaining({ target: apple.developmentUrl, state: 'ok' }),
      ]);
      const text = await runCli('status', '--check');
      expect(text.code).toBe(0);
      expect(text.stdout).toMatch(
        /^check +play-integrity \S+com\.example\.checked:decodeIntegrityToken as attest-verifier@\S+: ok \(access token granted; /m,
      );
      expect(text.stdout).toMatch(
        /^check +apple-receipts \S+ as team ABCDE12345 key KEY1234567: ok \(key accepted; /m,
      );
      for (const out of [ok.stdout, text.stdout, ok.stderr, text.stderr]) {
        expect(out).not.toContain(pem.split('\n')[1]!);
        expect(out).not.toContain(sa.account.privateKey.split('\n')[1]!);
        expect(out).not.toMatch(/ya29\.|eyJ/);
      }

      google.faultNext('decode', { status: 403 });
      const denied = await check();
      expect(denied.code).toBe(1);
      expect(denied.report.checks![0]).toMatchObject({
        state: 'failing',
        detail: 'decodeIntegrityToken answered HTTP 403 PERMISSION_DENIED',
      });
      expect(oneLine(denied)).toBe(
        `attest: play-integrity ${google.playIntegrityUrl}/v1/com.example.checked:decodeIntegrityToken as ${sa.account.clientEmail}: decodeIntegrityToken answered HTTP 403 PERMISSION_DENIED`,
      );

      // through the running server, which opens the keys and reaches its own configured upstreams
      const server = await startServer(
        {
          ...loadConfig({}, {}),
          dataDir: dataDir.path,
          port: 0,
          host: '127.0.0.1',
          androidRevocationUrl: null,
          googleOauthUrl: google.oauthUrl,
          googlePlayIntegrityUrl: google.playIntegrityUrl,
          appleReceiptUrlDevelopment: apple.developmentUrl,
          appleReceiptUrlProduction: apple.productionUrl,
        },
        captureLogger().logger,
        { migrate: false },
      );
      try {
        const served = await check();
        expect(served.code, served.stderr).toBe(0);
        expect(served.report.server).not.toBeNull();
        expect(served.report.checks!.map((c) => c.state)).toEqual(['ok', 'ok', 'ok']);
        // Apple no longer holds this key
        appleKeys.set(
          'ABCDE12345/KEY1234567',
          generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey,
        );
        const refused = await check();
        expect(refused.code).toBe(1);
        expect(refused.report.checks!.slice(1)).toEqual([
          expect.objectContaining({ state: 'failing', detail: 'Apple refused the key: HTTP 401' }),
          expect.objectContaining({ state: 'failing', detail: 'Apple refused the key: HTTP 401' }),
        ]);
        expect(oneLine(refused)).toContain(
          'as team ABCDE12345 key KEY1234567: Apple refused the key: HTTP 401',
        );
      } finally {
        await server.close();
      }
    } finally {
      await apple.close();
    }
  });

  it('PostgreSQL unreachable: the report without the password, then exit 3 with one line', async () => {
    process.env.DATABASE_URL = 'postgres://attest:s3cret@127.0.0.1:1/attest';
    process.env.ATTEST_DB_CONNECT_TIMEOUT = '1';
    const run = await status();
    expect(run.code).toBe(3);
    expect(run.report.database).toMatchObject({ kind: 'postgres', reachable: false });
    expect(run.report.database.where).not.toContain('s3cret');
    expect(run.stdout).not.toContain('s3cret');
    expect(oneLine(run)).toMatch(/^attest: cannot reach the database/);
  });

  it.skipIf(!postgresBackend())(
    'PostgreSQL reachable: current schema and its master key',
    async ({ postgresDatabase }) => {
      process.env.DATABASE_URL = postgresDatabase!.url;
      process.env.ATTEST_MASTER_KEY = TEST_MASTER_KEY_ENV;
      expect((await runCli('db', 'migrate')).code).toBe(0);
      const run = await status();
      expect(run.code).toBe(0);
      expect(run.report).toMatchObject({
        database: { kind: 'postgres', reachable: true },
        schema: { state: 'current', pending: 0 },
        server: null,
        receipts: { failing: 0 },
      });
      // --check opens the (no) credentials on PostgreSQL itself: nothing stored, nothing reached
      process.env.ATTEST_ANDROID_REVOCATION_URL = 'off';
      const checked = await runCli('status', '--check', '--json');
      expect(checked.code, checked.stderr).toBe(0);
      expect((JSON.parse(checked.stdout) as StatusReport).checks).toEqual([
        expect.objectContaining({
          upstream: 'play-integrity',
          state: 'not checked',
          detail: 'no allowlisted package has a service account',
        }),
        expect.objectContaining({
          upstream: 'apple-receipts',
          state: 'not checked',
          detail: 'no DeviceCheck key is stored',
        }),
      ]);
    },
  );
});
