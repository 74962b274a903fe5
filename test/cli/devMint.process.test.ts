/**
 * Test mode end to end through the built binary: `keys create --test`, `dev init`, `dev mint`
 * for every token shape, each token accepted by `attest serve` for a test API key and refused for
 * a live one (with the reason in the log line), the deny-path switches, and `verify-file`
 * explaining both verdicts.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { baseEnv, buildOnce, serveBin, stopBin, type Served } from '../support/binary.js';

const APP_ID = 'ABCDE12345.com.example.rp';
const PACKAGE = 'com.example.rp';
const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');

let env: NodeJS.ProcessEnv;
let dir: string;

/** CLI commands run in this process (as `attest` would, through the running server's admin socket): spawning node for each is slow on a loaded machine */
async function ok(...args: string[]): Promise<string> {
  const run = await runCli(...args);
  if (run.code !== 0) throw new Error(`attest ${args.join(' ')} exited ${run.code}: ${run.stderr}`);
  return run.stdout;
}

describe('test mode through attest serve', { timeout: 60_000 }, () => {
  let server: Served | undefined;
  let testKey: string;
  let liveKey: string;
  let logFile: string;
  let requestCount = 0;
  let saved: Record<string, string | undefined> = {};

  beforeAll(async () => {
    buildOnce();
    dir = mkdtempSync(join(tmpdir(), 'attest-dev-'));
    logFile = join(dir, 'attest.log');
    env = baseEnv({
      ATTEST_DATA_DIR: join(dir, 'data'),
      LOG_LEVEL: 'info',
      ATTEST_LOG_FILE: logFile,
    });
    saved = {
      ATTEST_DATA_DIR: process.env.ATTEST_DATA_DIR,
      DATABASE_URL: process.env.DATABASE_URL,
    };
    process.env.ATTEST_DATA_DIR = env.ATTEST_DATA_DIR;
    delete process.env.DATABASE_URL;
    server = await serveBin(env);
    testKey = (
      JSON.parse(await ok('keys', 'create', '--name', 'ci', '--test', '--json')) as { key: string }
    ).key;
    liveKey = (
      JSON.parse(await ok('keys', 'create', '--name', 'prod', '--json')) as { key: string }
    ).key;
    await ok('allowlist', 'add', 'apple', APP_ID);
    await ok('allowlist', 'add', 'android', PACKAGE, '--without-keys');
    await ok('dev', 'init');
  }, 120_000);
  afterAll(async () => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    if (server) await stopBin(server);
    rmSync(dir, { recursive: true, force: true });
  });

  /** the request's log line, waited for by its id (the file is written asynchronously) */
  async function logLine(requestId: string): Promise<Record<string, unknown>> {
    for (;;) {
      const lines = existsSync(logFile)
        ? readFileSync(logFile, 'utf8').split('\n').filter(Boolean)
        : [];
      const line = lines
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .find((l) => l.msg === 'request' && l.requestId === requestId);
      if (line) return line;
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  async function post(path: string, key: string, body?: unknown) {
    const requestId = `rq-${++requestCount}`;
    const res = await fetch(`${server!.url}${path}`, {
      method: 'POST',
      headers: {
        'X-Api-Key': key,
        'X-Request-Id': requestId,
        ...(body ? { 'Content-Type': 'application/json' } : {}),
      },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return {
      status: res.status,
      body: (await res.json()) as Record<string, unknown>,
      log: () => logLine(requestId),
    };
  }

  /** init with `key`, mint over its server nonce with `mint(...nonceFlags)`, verify with `key` */
  async function sessionRound(key: string, mint: (nonceFlags: string[]) => Promise<string>) {
    const init = await post('/api/v1/attestation/init', key);
    expect(init.status).toBe(200);
    const token = await mint(['--server-nonce', init.body.serverNonce as string]);
    const verified = await post('/api/v1/attestation/verify', key, {
      attestationToken: token,
      sessionReference: init.body.sessionReference,
    });
    expect(verified.status).toBe(200);
    return { body: verified.body, log: await verified.log() };
  }

  async function sessionlessRound(key: string, mint: (nonceFlags: string[]) => Promise<string>) {
    const nonce = b64(randomBytes(32));
    const token = await mint(['--nonce', nonce]);
    const verified = await post('/api/v1/attestation/verify', key, {
      attestationToken: token,
      expectedNonce: nonce,
    });
    expect(verified.status).toBe(200);
    return { body: verified.body, log: await verified.log(), token, nonce };
  }

  const mintApple =
    (device: string, ...extra: string[]) =>
    async (nonceFlags: string[]) =>
      (
        JSON.parse(
          await ok(
            'dev',
            'mint',
            'apple',
            '--app-id',
            APP_ID,
            '--device',
            join(dir, device),
            ...nonceFlags,
            ...extra,
            '--json',
          ),
        ) as { token: string }
      ).token;
  const mintGms =
    (...extra: string[]) =>
    async (nonceFlags: string[]) =>
      (await ok('dev', 'mint', 'gms', '--package', PACKAGE, ...nonceFlags, ...extra)).trim();

  it("keys list shows each key's mode", async () => {
    const keys = JSON.parse(await ok('keys', 'list', '--json')) as { name: string; mode: string }[];
    expect(keys.map((k) => [k.name, k.mode])).toEqual([
      ['ci', 'test'],
      ['prod', 'live'],
    ]);
    expect(await ok('keys', 'list')).toMatch(/^ID\s+NAME\s+MODE\s+STATE/);
  });

  it('dev init is idempotent; --rotate replaces the CA', async () => {
    const again = JSON.parse(await ok('dev', 'init', '--json')) as {
      created: boolean;
      rootSha256: string;
    };
    expect(again.created).toBe(false);
    expect(again.rootSha256).toMatch(/^[0-9a-f]{64}$/);
  });

  it('registration then assertions: valid for the test key; the live key refuses the same device, with the reason in the log', async () => {
    const registered = await sessionRound(testKey, mintApple('phone-1.json'));
    expect(registered.body).toMatchObject({
      isValid: true,
      appleTokenDetails: { appId: APP_ID, environment: 'Production', assertionCounter: 0 },
    });
    expect(registered.log).toMatchObject({ mode: 'test', isValid: true, service: 'apple' });
    expect(statSync(join(dir, 'phone-1.json')).mode & 0o777).toBe(0o600);

    const asserted = await sessionRound(testKey, mintApple('phone-1.json'));
    expect(asserted.body).toMatchObject({
      isValid: true,
      appleTokenDetails: { assertionCounter: 1 },
    });
    const next = await sessionlessRound(testKey, mintApple('phone-1.json'));
    expect(next.body).toMatchObject({ isValid: true, appleTokenDetails: { assertionCounter: 2 } });

    // the key was registered by a test key: a live key must not accept its assertions
    const live = await sessionRound(liveKey, mintApple('phone-1.json'));
    expect(live.body).toEqual({ isValid: false, statusCode: 0 });
    expect(live.log).toMatchObject({ mode: 'live', reason: 'apple_key_unknown' });

    // a registration under the development CA is refused to the live key at the chain
    const liveRegistration = await sessionRound(liveKey, mintApple('phone-2.json'));
    expect(liveRegistration.body).toEqual({ isValid: false, statusCode: 0 });
    expect(liveRegistration.log).toMatchObject({ mode: 'live', reason: 'apple_chain_invalid' });
  });

  it('attestation plus assertion (--both): valid for the test key, refused for the live key', async () => {
    const live = await sessionlessRound(liveKey, mintApple('phone-3.json', '--both'));
    expect(live.log).toMatchObject({ mode: 'live', isValid: false, reason: 'apple_chain_invalid' });
    const test = await sessionlessRound(testKey, mintApple('phone-4.json', '--both'));
    expect(test.body).toMatchObject({ isValid: true, appleTokenDetails: { assertionCounter: 1 } });
  });

  it('Play Integrity: a test-only pair is made on first mint, listed as such, and tried only for test keys', async () => {
    const test = await sessionlessRound(testKey, mintGms());
    expect(test.body).toMatchObject({
      isValid: true,
      googleTokenDetails: {
        packageName: PACKAGE,
        deviceIntegrityVerdicts: ['MEETS_BASIC_INTEGRITY', 'MEETS_DEVICE_INTEGRITY'],
      },
    });
    expect(test.log).toMatchObject({ mode: 'test', isValid: true, service: 'gms' });
    const live = await sessionRound(liveKey, mintGms('--verdict', 'strong'));
    expect(live.log).toMatchObject({ mode: 'live', isValid: false, reason: 'gms_decrypt_failed' });

    const listed = JSON.parse(await ok('allowlist', 'list', '--json')) as {
      android: { packageName: string; keyPairs: string[]; testOnlyKeyPairs: string[] }[];
    };
    expect(listed.android).toEqual([
      expect.objectContaining({
        packageName: PACKAGE,
        keyPairs: [],
        testOnlyKeyPairs: [expect.stringMatching(/^[0-9a-f]{16}$/)],
      }),
    ]);
    expect(await ok('allowlist', 'list')).toMatch(/[0-9a-f]{16} \(test-only\)/);
  });

  it.each([
    [
      'apple --wrong-nonce (registration)',
      () => mintApple('phone-5.json', '--wrong-nonce'),
      'apple_nonce_mismatch',
    ],
    [
      'apple --wrong-app-id',
      () => mintApple('phone-5.json', '--wrong-app-id'),
      'apple_app_not_allowed',
    ],
    ['apple --expired', () => mintApple('phone-5.json', '--expired'), 'apple_chain_invalid'],
    ['gms --wrong-nonce', () => mintGms('--wrong-nonce'), 'gms_nonce_mismatch'],
    ['gms --wrong-package', () => mintGms('--wrong-package'), 'gms_package_mismatch'],
    ['gms --stale', () => mintGms('--stale'), 'gms_token_stale'],
    ['gms --age 20m (over the 600 s default)', () => mintGms('--age', '20m'), 'gms_token_stale'],
    [
      'gms --verdict basic (package minimum is device)',
      () => mintGms('--verdict', 'basic'),
      'gms_integrity_insufficient',
    ],
    [
      'gms --recognition UNEVALUATED',
      () => mintGms('--recognition', 'UNEVALUATED'),
      'gms_app_not_recognized',
    ],
  ])('deny path %s is refused for the test key with %s', async (_name, mint, reason) => {
    const round = await sessionlessRound(testKey, mint());
    expect(round.body).toEqual({ isValid: false, statusCode: 0 });
    expect(round.log).toMatchObject({ mode: 'test', reason });
  });

  it('a deny-path registration leaves the device file unregistered; a replayed counter is refused', async () => {
    // phone-5 only ever minted deny-path tokens: its next mint is still a registration
    const registered = await sessionlessRound(testKey, mintApple('phone-5.json'));
    expect(registered.body).toMatchObject({
      isValid: true,
      appleTokenDetails: { assertionCounter: 0 },
    });
    const first = await sessionlessRound(testKey, mintApple('phone-5.json'));
    expect(first.body).toMatchObject({ isValid: true, appleTokenDetails: { assertionCounter: 1 } });
    const replay = await sessionlessRound(testKey, mintApple('phone-5.json', '--counter', '1'));
    expect(replay.log).toMatchObject({ reason: 'apple_counter_replay' });
    const wrongNonce = await sessionlessRound(testKey, mintApple('phone-5.json', '--wrong-nonce'));
    expect(wrongNonce.log).toMatchObject({ reason: 'apple_signature_invalid' });
  });

  it('verify-file explains both verdicts: rejected as a live key would (with a hint), valid with --dev-roots', async () => {
    for (const mint of [mintApple('phone-6.json'), mintGms()]) {
      const nonce = b64(randomBytes(32));
      const file = join(dir, `token-${randomBytes(4).toString('hex')}.b64`);
      writeFileSync(file, await mint(['--nonce', nonce]));
      const live = await runCli('verify-file', file, '--nonce', nonce, '--json');
      expect(live.code).toBe(1);
      const liveJson = JSON.parse(live.stdout) as {
        valid: boolean;
        reason: string;
        mode: string;
        hints: { code: string }[];
      };
      expect(liveJson).toMatchObject({ valid: false, mode: 'live' });
      expect(['apple_chain_invalid', 'gms_decrypt_failed']).toContain(liveJson.reason);
      expect(liveJson.hints.map((h) => h.code)).toContain('test_keys_only');
      const test = await runCli('verify-file', file, '--nonce', nonce, '--dev-roots', '--json');
      expect(test.code).toBe(0);
      expect(JSON.parse(test.stdout)).toMatchObject({ valid: true, mode: 'test', hints: [] });
    }
  });

  it('verify-file takes a saved verify request body, with its expectedNonce', async () => {
    const nonce = b64(randomBytes(32));
    const token = await mintGms()(['--nonce', nonce]);
    const file = join(dir, 'body.json');
    writeFileSync(file, JSON.stringify({ attestationToken: token, expectedNonce: nonce }));
    const run = await runCli('verify-file', file, '--dev-roots', '--json');
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ valid: true, nonceChecked: true });
    writeFileSync(
      file,
      JSON.stringify({ attestationToken: token, expectedNonce: b64(randomBytes(32)) }),
    );
    expect(
      JSON.parse((await runCli('verify-file', file, '--dev-roots', '--json')).stdout),
    ).toMatchObject({ valid: false, reason: 'nonce_mismatch' });
  });

  it("Apple's policies without a device: --receipt and the iOS 27 extensions pass for the test key; dev receipts refresh through the running server reaches the next assertion", async () => {
    const RISKY = 'ABCDE12345.com.example.risky';
    await ok('allowlist', 'add', 'apple', RISKY, '--require-receipt', '--max-risk-metric', '5');
    await ok('allowlist', 'add', 'apple', RISKY, '--validation-category', 'appstore');
    const mint = async (nonceFlags: string[], ...extra: string[]) =>
      JSON.parse(
        await ok(
          'dev',
          'mint',
          'apple',
          '--app-id',
          RISKY,
          '--device',
          join(dir, 'ios27.json'),
          ...nonceFlags,
          ...extra,
          '--json',
        ),
      ) as { token: string; keyId: string };
    let keyId = '';
    const registered = await sessionlessRound(testKey, async (flags) => {
      const minted = await mint(
        flags,
        '--receipt',
        '--validation-category',
        'appstore',
        '--bundle-version',
        '4.2',
      );
      keyId = minted.keyId;
      return minted.token;
    });
    expect(registered.body).toMatchObject({
      isValid: true,
      appleTokenDetails: { validationCategory: 'appstore', bundleVersion: '4.2' },
    });
    expect(registered.log).toMatchObject({ receipt: 'valid' });
    const first = await sessionlessRound(testKey, async (flags) => (await mint(flags)).token);
    expect(first.body).toMatchObject({ isValid: true, appleTokenDetails: { assertionCounter: 1 } });

    expect(
      JSON.parse(await ok('dev', 'receipts', 'refresh', keyId, '--risk-metric', '9', '--json')),
    ).toMatchObject({ keyId, riskMetric: 9 });
    const risky = await sessionlessRound(testKey, async (flags) => (await mint(flags)).token);
    expect(risky.body).toEqual({ isValid: false, statusCode: 0 });
    expect(risky.log).toMatchObject({ mode: 'test', reason: 'apple_risk_exceeded' });
    await ok('allowlist', 'add', 'apple', RISKY, '--max-risk-metric', '10');
    const allowed = await sessionlessRound(testKey, async (flags) => (await mint(flags)).token);
    expect(allowed.body).toMatchObject({ isValid: true, appleTokenDetails: { riskMetric: 9 } });
  });

  it('dev init --rotate: tokens under the new CA verify for test keys within the propagation time', async () => {
    const rotated = JSON.parse(await ok('dev', 'init', '--rotate', '--json')) as {
      created: boolean;
      rotated: boolean;
    };
    expect(rotated).toMatchObject({ created: true, rotated: true });
    // the server re-reads the development root at most every 5 s: bounded retries, not a sleep
    const deadline = Date.now() + 15_000;
    let last: Record<string, unknown> = {};
    while (Date.now() < deadline) {
      const round = await sessionlessRound(testKey, mintApple(`phone-r-${requestCount}.json`));
      last = round.log;
      if (round.body.isValid === true) break;
      expect(round.log.reason).toBe('apple_chain_invalid');
    }
    expect(last.isValid).toBe(true);
  }, 60_000);
});
