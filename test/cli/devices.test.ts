// `--max-verifies-per-device` on `allowlist add apple|android` and `attest devices show`, in
// process: on the embedded database through the running server's admin socket, and directly on
// PostgreSQL; the flag's deny paths exit 2 before any database.
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { windowStartOf } from '../../src/core/deviceVelocity.js';
import { createAndroidKeyRepository } from '../../src/db/androidKeys.js';
import { createAppleKeyRepository } from '../../src/db/appleKeys.js';
import { openDatabase } from '../../src/db/client.js';
import type { DatabaseHandle } from '../../src/db/database.js';
import { createDeviceVelocityRepository } from '../../src/db/deviceVelocity.js';
import { startServer, type RunningServer } from '../../src/server/start.js';
import { oneLine, runCli } from '../support/cli.js';
import { postgresBackend } from '../support/databases.js';
import { captureLogger } from '../support/service.js';
import { createAssertion, createDeviceKey, encodeAppleToken } from '../support/appleFactory.js';
import { scratch, verifyFile } from '../support/verifyFileTokens.js';
import { it } from '../support/fixtures.js';

const files = scratch('attest-devices-vf-');
afterAll(() => files.remove());

const APP = 'ABCDE12345.com.example.velocity';
const PKG = 'com.example.velocity';
const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');

describe('--max-verifies-per-device and devices show: bad input exits 2 with one line', () => {
  it.each([
    ['10'],
    ['10/'],
    ['/1h'],
    ['x/1h'],
    ['1.5/1h'],
    ['-1/1h'],
    ['0/1h'],
    ['1000001/1h'],
    ['10/1'],
    ['10/0m'],
    ['10/59s'],
    ['10/31d'],
    ['10/5w'],
    ['10/1y'],
    ['10/1h/2'],
  ])('allowlist add apple --max-verifies-per-device %s', async (value) => {
    const run = await runCli('allowlist', 'add', 'apple', APP, '--max-verifies-per-device', value);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(oneLine(run)).toMatch(/^attest: --max-verifies-per-device/);
  });

  it('allowlist add android checks it the same way', async () => {
    const run = await runCli(
      'allowlist',
      'add',
      'android',
      PKG,
      '--key-attestation',
      '--max-verifies-per-device',
      '100/1q',
    );
    expect(run.code).toBe(2);
    expect(oneLine(run)).toMatch(/^attest: --max-verifies-per-device: PERIOD must be/);
  });

  it.each([['not-base64!'], [b64(randomBytes(16))], ['']])('devices show %j', async (id) => {
    const run = await runCli('devices', 'show', id);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(oneLine(run)).toMatch(/^attest: .* is not a key id: base64 of 32 bytes/);
  });

  it('the help says what a device is, and that Play Integrity tokens are not counted', async () => {
    const android = await runCli('allowlist', 'add', 'android', '--help');
    expect(android.stdout.replace(/\s+/g, ' ')).toMatch(
      /--max-verifies-per-device <n\/period>.*android-key key.*Play Integrity tokens carry no device identity and are never counted/,
    );
    const apple = await runCli('allowlist', 'add', 'apple', '--help');
    expect(apple.stdout.replace(/\s+/g, ' ')).toMatch(/--no-max-verifies-per-device/);
  });
});

/** The same commands on whichever database the environment names; `handle` is that database. */
function devicesSuite(handle: () => DatabaseHandle) {
  it('allowlist add apple sets, lists, keeps and removes the limit', async () => {
    const add = await runCli(
      'allowlist',
      'add',
      'apple',
      APP,
      '--max-verifies-per-device',
      '100/1h',
      '--json',
    );
    expect(add.code, add.stderr).toBe(0);
    expect(JSON.parse(add.stdout)).toMatchObject({
      result: 'added',
      policy: { maxVerifiesPerDevice: { max: 100, periodSeconds: 3600 } },
    });
    // the change's audit line carries the limit
    expect(JSON.parse(oneLine(add))).toMatchObject({
      audit: {
        action: 'allowlist.add',
        after: { maxVerifiesPerDevice: { max: 100, periodSeconds: 3600 } },
      },
    });
    const list = await runCli('allowlist', 'list');
    expect(list.stdout).toMatch(
      new RegExp(`apple\\s+${APP.replace(/\./g, '\\.')}\\s+env production, 100/1h per device`),
    );
    // another flag alone keeps it
    const kept = await runCli('allowlist', 'add', 'apple', APP, '--require-receipt', '--json');
    expect(JSON.parse(kept.stdout)).toMatchObject({
      policy: { requireReceipt: true, maxVerifiesPerDevice: { max: 100, periodSeconds: 3600 } },
    });
    const off = await runCli(
      'allowlist',
      'add',
      'apple',
      APP,
      '--no-max-verifies-per-device',
      '--json',
    );
    expect(off.code).toBe(0);
    expect(JSON.parse(off.stdout)).toMatchObject({
      result: 'updated',
      policy: { maxVerifiesPerDevice: null },
    });
    expect(JSON.parse(oneLine(off))).toMatchObject({
      audit: {
        action: 'allowlist.update',
        before: { maxVerifiesPerDevice: { max: 100, periodSeconds: 3600 } },
        after: { maxVerifiesPerDevice: null },
      },
    });
    const json = JSON.parse((await runCli('allowlist', 'list', '--json')).stdout) as {
      apple: { appId: string; maxVerifiesPerDevice: unknown }[];
    };
    expect(json.apple.find((a) => a.appId === APP)?.maxVerifiesPerDevice).toBeNull();
  });

  it('allowlist add android sets it for android-key devices', async () => {
    const add = await runCli(
      'allowlist',
      'add',
      'android',
      PKG,
      '--without-keys',
      '--key-attestation',
      '--max-verifies-per-device',
      '1000/1d',
    );
    expect(add.code, add.stderr).toBe(0);
    expect(add.stdout).toMatch(/at most 1000\/1d verifies per device/);
    const list = await runCli('allowlist', 'list');
    expect(list.stdout).toMatch(/1000\/1d per android-key device/);
    const json = JSON.parse((await runCli('allowlist', 'list', '--json')).stdout) as {
      android: { packageName: string; maxVerifiesPerDevice: unknown }[];
    };
    expect(json.android.find((p) => p.packageName === PKG)?.maxVerifiesPerDevice).toEqual({
      max: 1000,
      periodSeconds: 86_400,
    });
    // a policy change alone: no keys needed for an existing package
    const off = await runCli('allowlist', 'add', 'android', PKG, '--no-max-verifies-per-device');
    expect(off.code, off.stderr).toBe(0);
    expect(off.stdout).toMatch(/verifies per device not counted/);
  });

  it('devices show: service, app, registered and last used, the current window (text and --json)', async () => {
    const db = handle().db;
    await runCli(
      'allowlist',
      'add',
      'android',
      PKG,
      '--without-keys',
      '--key-attestation',
      '--max-verifies-per-device',
      '5/1h',
    );
    const keyId = randomBytes(32);
    await createAndroidKeyRepository(db).register({
      keyId,
      publicKey: randomBytes(91),
      packageName: PKG,
      attestationSecurityLevel: 'TrustedEnvironment',
      keyMintSecurityLevel: 'TrustedEnvironment',
      verifiedBootState: 'Verified',
      deviceLocked: true,
      verifiedBootKey: randomBytes(32),
      osPatchLevel: 202611,
      attestationVersion: 300,
      signatureDigests: [],
    });
    const velocity = createDeviceVelocityRepository(db);
    const now = new Date();
    for (let i = 0; i < 3; i++)
      await velocity.count({
        keyId,
        service: 'android-key',
        windowStart: windowStartOf(now, 3600),
        periodSeconds: 3600,
        at: now,
      });
    const json = await runCli('devices', 'show', b64(keyId), '--json');
    expect(json.code, json.stderr).toBe(0);
    const start = windowStartOf(now, 3600);
    const doc = JSON.parse(json.stdout) as Record<string, unknown>;
    expect(doc).toEqual({
      keyId: b64(keyId),
      service: 'android-key',
      app: PKG,
      mode: 'live',
      registeredAt: expect.any(String),
      lastUsedAt: now.toISOString(),
      maxVerifiesPerDevice: { max: 5, periodSeconds: 3600 },
      currentWindow: {
        start: start.toISOString(),
        end: new Date(start.getTime() + 3_600_000).toISOString(),
        verifies: 3,
      },
    });
    const text = await runCli(
      'devices',
      'show',
      b64(keyId).replace(/\+/g, '-').replace(/\//g, '_'),
    );
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain(`key ${b64(keyId)}: android-key ${PKG}\n`);
    expect(text.stdout).toContain(`last used: ${now.toISOString()}\n`);
    expect(text.stdout).toMatch(/verifies in the current window: 3 of at most 5 \(5\/1h; window /);

    const apple = randomBytes(32);
    await runCli('allowlist', 'add', 'apple', APP, '--no-max-verifies-per-device');
    await createAppleKeyRepository(db).register({
      keyId: apple,
      publicKey: randomBytes(91),
      appId: APP,
      environment: 'Development',
      counter: 0,
      mode: 'test',
    });
    const plain = await runCli('devices', 'show', b64(apple));
    expect(plain.code, plain.stderr).toBe(0);
    expect(plain.stdout).toContain(
      `key ${b64(apple)}: apple ${APP} (Development), registered with a test API key\n`,
    );
    expect(plain.stdout).toMatch(/\nlast used: \d{4}-/);
    expect(plain.stdout).toContain(
      `verifies in the current window: not counted: ${APP} sets no --max-verifies-per-device\n`,
    );
    const appleJson = JSON.parse(
      (await runCli('devices', 'show', b64(apple), '--json')).stdout,
    ) as Record<string, unknown>;
    expect(appleJson).toMatchObject({
      service: 'apple',
      environment: 'Development',
      maxVerifiesPerDevice: null,
      currentWindow: null,
    });
  });

  it('verify-file counts the device as the database does, this verify included, and records nothing', async () => {
    const db = handle().db;
    const app = 'ABCDE12345.com.example.vf';
    await runCli('allowlist', 'add', 'apple', app, '--max-verifies-per-device', '2/1h');
    const device = await createDeviceKey();
    await createAppleKeyRepository(db).register({
      keyId: device.keyId,
      publicKey: device.spki,
      appId: app,
      environment: 'Production',
      counter: 0,
    });
    const now = new Date();
    const velocity = createDeviceVelocityRepository(db);
    const counted = {
      keyId: device.keyId,
      service: 'apple' as const,
      windowStart: windowStartOf(now, 3600),
      periodSeconds: 3600,
      at: now,
    };
    expect(await velocity.count(counted)).toBe(1);
    const nonce = randomBytes(32);
    const token = files.file(
      encodeAppleToken({
        nonce,
        keyId: device.keyId,
        assertion: createAssertion(device, { nonce, counter: 1, appId: app }).assertion,
      }),
    );
    const second = await verifyFile([token, '--json', '--nonce', b64(nonce)], {
      DATABASE_URL: process.env.DATABASE_URL,
    });
    expect(second.json, second.stderr).toMatchObject({ valid: true });
    expect(second.json!.checks.find((c) => c.id === 'apple.deviceVelocity')).toMatchObject({
      status: 'pass',
      detail: expect.stringContaining('verify 2 of at most 2'),
    });
    expect(await velocity.count(counted)).toBe(2);
    const third = await verifyFile([token, '--json', '--nonce', b64(nonce)], {
      DATABASE_URL: process.env.DATABASE_URL,
    });
    expect(third.code).toBe(1);
    expect(third.json).toMatchObject({ valid: false, reason: 'device_rate_exceeded' });
    expect(third.json!.checks.find((c) => c.id === 'apple.deviceVelocity')?.status).toBe('fail');
    // verify-file records nothing
    expect(await velocity.peek(counted)).toBe(2);
  });

  it('devices show of a key id no key has: one line, exit 1 (a negative answer, as keys update gives)', async () => {
    const id = b64(randomBytes(32));
    const run = await runCli('devices', 'show', id);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(oneLine(run)).toBe(`attest: no App Attest or android-key key ${id} is registered`);
  });
}

describe('on the embedded database, through the running server', () => {
  let server: RunningServer | undefined;
  it.beforeAll(async ({ cliDataDir }) => {
    void cliDataDir;
    process.env.ATTEST_ACTOR = 'alice';
    const { logger } = captureLogger();
    server = await startServer(loadConfig({ port: 0, host: '127.0.0.1' }), logger, {
      migrate: true,
    });
  }, 120_000);
  afterAll(async () => {
    await server?.close();
    delete process.env.ATTEST_ACTOR;
  });
  devicesSuite(() => server!.database);
});

const pg = postgresBackend();
describe.skipIf(!pg)('on PostgreSQL, directly', () => {
  let handle: DatabaseHandle;
  it.beforeAll(async ({ cliPostgres }) => {
    process.env.ATTEST_ACTOR = 'alice';
    handle = await openDatabase({ url: cliPostgres.url, dataDir: '', role: 'cli' });
  });
  afterAll(async () => {
    await handle?.close();
    delete process.env.ATTEST_ACTOR;
  });
  devicesSuite(() => handle);
});
