/**
 * examples/rp-node end to end: the real `attest serve` (embedded database, built binary), a test
 * API key, the development CA, tokens minted by `attest dev mint` for both platforms, and the
 * example RP's login in front of it through the typed client. The deny paths are the point: a
 * token the service refuses, a replay, a reused challenge, an app the RP does not accept, a live
 * key, and the service out of reach all deny the login.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { createAttestClient } from 'attest-client';
import { createRpApp } from '../../examples/rp-node/app.js';
import { createLedgerApp } from '../../examples/rp-node/ledger.js';
import { ROOT, baseEnv, buildOnce, serveBin, stopBin, type Served } from '../support/binary.js';
import { runCli } from '../support/cli.js';
import { startTcpProxy } from '../support/tcpProxy.js';

const APP_ID = 'ABCDE12345.com.example.rp';
const OTHER_APP_ID = 'ABCDE12345.com.example.other';
const PACKAGE = 'com.example.rp';
const ISSUER = 'https://attest.example.com';

/** CLI commands run in this process, through the running server's admin socket (a node per mint is slow on a busy machine) */
async function attest(...args: string[]): Promise<string> {
  const run = await runCli(...args);
  if (run.code !== 0) throw new Error(`attest ${args.join(' ')} exited ${run.code}: ${run.stderr}`);
  return run.stdout.trim();
}

/** a port nothing listens on */
async function closedPort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

describe('examples/rp-node against attest serve', { timeout: 60_000 }, () => {
  let dir: string;
  let service: Served;
  let url: string;
  let testKey: string;
  let liveKey: string;
  let tokensKey: { id: string; key: string };
  const saved = {
    ATTEST_DATA_DIR: process.env.ATTEST_DATA_DIR,
    DATABASE_URL: process.env.DATABASE_URL,
  };
  const denials: Record<string, unknown>[] = [];

  beforeAll(async () => {
    buildOnce();
    dir = mkdtempSync(join(tmpdir(), 'attest-rp-'));
    const env = baseEnv({ ATTEST_DATA_DIR: join(dir, 'data'), ATTEST_ISSUER: ISSUER });
    process.env.ATTEST_DATA_DIR = env.ATTEST_DATA_DIR;
    delete process.env.DATABASE_URL;
    service = await serveBin(env);
    url = service.url;
    testKey = (
      JSON.parse(await attest('keys', 'create', '--name', 'rp-node', '--test', '--json')) as {
        key: string;
      }
    ).key;
    liveKey = (
      JSON.parse(await attest('keys', 'create', '--name', 'rp-node-live', '--json')) as {
        key: string;
      }
    ).key;
    tokensKey = JSON.parse(
      await attest(
        'keys',
        'create',
        '--name',
        'rp-node-tokens',
        '--test',
        '--result-tokens',
        '--json',
      ),
    ) as { id: string; key: string };
    await attest('allowlist', 'add', 'apple', APP_ID);
    await attest('allowlist', 'add', 'apple', OTHER_APP_ID);
    await attest('allowlist', 'add', 'android', PACKAGE, '--without-keys');
    await attest('dev', 'init');
  }, 180_000);
  afterAll(async () => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    if (service) await stopBin(service);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const rpWith = (apiKey: string, baseUrl = url) =>
    createRpApp({
      attest: { baseUrl, apiKey, timeoutMs: 10_000, initRetries: 0 },
      appleAppIds: [APP_ID],
      androidPackages: [PACKAGE],
      log: (line) => denials.push(line),
    });

  async function challenge(rp: ReturnType<typeof createRpApp>) {
    const res = await rp.request('/login/challenge', { method: 'POST' });
    expect(res.status).toBe(200);
    return (await res.json()) as { challengeId: string; nonce: string };
  }
  async function login(
    rp: ReturnType<typeof createRpApp>,
    challengeId: string,
    attestationToken: string,
  ) {
    const res = await rp.request('/login', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ challengeId, attestationToken }),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  }
  const mintApple = (device: string, nonce: string, ...flags: string[]) =>
    attest(
      'dev',
      'mint',
      'apple',
      '--app-id',
      APP_ID,
      '--device',
      join(dir, device),
      '--server-nonce',
      nonce,
      ...flags,
    );
  const mintGms = (nonce: string, ...flags: string[]) =>
    attest('dev', 'mint', 'gms', '--package', PACKAGE, '--server-nonce', nonce, ...flags);

  it('iOS: a registration then an assertion log in; replaying the assertion on a new challenge is denied', async () => {
    const rp = rpWith(testKey);
    const first = await challenge(rp);
    const registration = await login(
      rp,
      first.challengeId,
      await mintApple('iphone.json', first.nonce),
    );
    expect(registration).toEqual({
      status: 200,
      body: {
        loggedIn: true,
        device: { platform: 'ios', appId: APP_ID, environment: 'Production' },
      },
    });

    const second = await challenge(rp);
    const assertion = await mintApple('iphone.json', second.nonce);
    expect((await login(rp, second.challengeId, assertion)).status).toBe(200);

    const third = await challenge(rp);
    expect(await login(rp, third.challengeId, assertion)).toEqual({
      status: 403,
      body: { error: 'device check failed' },
    });
  });

  it('Android: a minted Play Integrity token logs in with its verdicts', async () => {
    const rp = rpWith(testKey);
    const c = await challenge(rp);
    const res = await login(rp, c.challengeId, await mintGms(c.nonce));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      loggedIn: true,
      device: { platform: 'android', packageName: PACKAGE },
    });
    expect((res.body.device as { verdicts: string[] }).verdicts).toContain(
      'MEETS_DEVICE_INTEGRITY',
    );
  });

  it.each([
    [
      'apple, evidence over another nonce',
      (n: string) => mintApple('iphone-deny.json', n, '--wrong-nonce'),
    ],
    ['apple, an expired attestation', (n: string) => mintApple('iphone-deny.json', n, '--expired')],
    ['gms, a basic-integrity device', (n: string) => mintGms(n, '--verdict', 'basic')],
    ['gms, a verdict for another package', (n: string) => mintGms(n, '--wrong-package')],
    ['gms, a stale verdict', (n: string) => mintGms(n, '--stale')],
  ])('deny: %s', async (_name, mint) => {
    const rp = rpWith(testKey);
    const c = await challenge(rp);
    expect(await login(rp, c.challengeId, await mint(c.nonce))).toEqual({
      status: 403,
      body: { error: 'device check failed' },
    });
  });

  it('deny: a challenge is single use, even when its first login succeeded', async () => {
    const rp = rpWith(testKey);
    const c = await challenge(rp);
    const token = await mintGms(c.nonce);
    expect((await login(rp, c.challengeId, token)).status).toBe(200);
    expect((await login(rp, c.challengeId, token)).status).toBe(403);
  });

  it('deny: an app the service allows but this RP does not accept', async () => {
    const rp = rpWith(testKey);
    const c = await challenge(rp);
    const token = await attest(
      'dev',
      'mint',
      'apple',
      '--app-id',
      OTHER_APP_ID,
      '--device',
      join(dir, 'other.json'),
      '--server-nonce',
      c.nonce,
    );
    expect((await login(rp, c.challengeId, token)).status).toBe(403);
    expect(denials.at(-1)).toMatchObject({ why: 'another app', service: 'apple' });
  });

  it('deny: minted tokens never pass for a live API key', async () => {
    const rp = rpWith(liveKey);
    for (const mint of [
      (n: string) => mintGms(n),
      (n: string) => mintApple('iphone-live.json', n),
    ]) {
      const c = await challenge(rp);
      expect((await login(rp, c.challengeId, await mint(c.nonce))).status).toBe(403);
    }
  });

  it('deny: an unknown or revoked API key answers no challenge (503, the client error logged)', async () => {
    const unknown = rpWith('attest_0000000000000000_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa');
    expect((await unknown.request('/login/challenge', { method: 'POST' })).status).toBe(503);
    expect(denials.at(-1)).toMatchObject({ msg: 'challenge unavailable', code: 'ERR_ATTEST_HTTP' });

    // revoked before this RP ever used it (a key in use is refused within the service's 5 s key cache)
    const revoked = JSON.parse(
      await attest('keys', 'create', '--name', 'rp-node-revoked', '--test', '--json'),
    ) as { id: string; key: string };
    await attest('keys', 'revoke', revoked.id, '--yes');
    expect((await rpWith(revoked.key).request('/login/challenge', { method: 'POST' })).status).toBe(
      503,
    );
    expect(denials.at(-1)).toMatchObject({ msg: 'challenge unavailable', code: 'ERR_ATTEST_HTTP' });
  });

  it('deny: the service out of reach (nothing listening, or no answer in time) never logs anyone in', async () => {
    const away = rpWith(testKey, `http://127.0.0.1:${await closedPort()}`);
    expect((await away.request('/login/challenge', { method: 'POST' })).status).toBe(503);
    expect(denials.at(-1)).toMatchObject({ code: 'ERR_ATTEST_NETWORK' });

    // a challenge issued while the service answered; its login finds the path to it stalled
    const proxy = await startTcpProxy('127.0.0.1', Number(new URL(url).port));
    try {
      const rp = createRpApp({
        attest: { baseUrl: `http://127.0.0.1:${proxy.port}`, apiKey: testKey, timeoutMs: 500 },
        appleAppIds: [APP_ID],
        androidPackages: [PACKAGE],
        log: (line) => denials.push(line),
      });
      const c = await challenge(rp);
      const token = await mintGms(c.nonce);
      // the client's kept-alive connection freezes too: the request is held back, never answered
      proxy.setMode('stall');
      expect((await login(rp, c.challengeId, token)).status).toBe(503);
      expect(denials.at(-1)).toMatchObject({ code: 'ERR_ATTEST_TIMEOUT' });
    } finally {
      proxy.setMode('forward');
      proxy.cut();
      await proxy.close();
    }
  });

  /** the ledger (examples/rp-node/ledger.js) on a port of its own, trusting `audience` */
  async function startLedger(audience: string, acceptTestTokens = true) {
    const lines: Record<string, unknown>[] = [];
    const app = createLedgerApp({
      issuer: ISSUER,
      audience,
      // the issuer's host is not this test's: the keys come from the service itself
      jwksUrl: `${url}/.well-known/jwks.json`,
      // the RP's key is a test key: its tokens are test tokens, which this test ledger accepts
      acceptTestTokens,
      testJwksUrl: `${url}/.well-known/jwks-test.json`,
      log: (line) => lines.push(line),
    });
    const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
    await once(server, 'listening');
    const ledgerUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return {
      url: ledgerUrl,
      lines,
      close: () => new Promise((r) => server.close(r)),
    };
  }
  const rpWithLedger = (apiKey: string, ledgerUrl: string) =>
    createRpApp({
      attest: { baseUrl: url, apiKey, timeoutMs: 10_000, initRetries: 0 },
      appleAppIds: [APP_ID],
      androidPackages: [PACKAGE],
      log: (line) => denials.push(line),
      ledgerUrl,
    });

  it('result token: the RP forwards it and the ledger verifies it offline against the published keys', async () => {
    const ledger = await startLedger(tokensKey.id);
    try {
      const rp = rpWithLedger(tokensKey.key, ledger.url);
      const c = await challenge(rp);
      const res = await login(rp, c.challengeId, await mintGms(c.nonce));
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({
        loggedIn: true,
        ledger: { accepted: true, device: PACKAGE, service: 'gms' },
      });
      // an Apple login too: its subject is the App Attest key id
      const first = await challenge(rp);
      const apple = await login(rp, first.challengeId, await mintApple('ledger.json', first.nonce));
      expect(apple.status).toBe(200);
      expect((apple.body.ledger as { device: string }).device).toMatch(/^[A-Za-z0-9+/]{43}=$/);
    } finally {
      await ledger.close();
    }
  });

  it("deny: a ledger that does not accept test tokens refuses a test key's token (test_token)", async () => {
    const ledger = await startLedger(tokensKey.id, false);
    try {
      const rp = rpWithLedger(tokensKey.key, ledger.url);
      const first = await challenge(rp);
      expect((await login(rp, first.challengeId, await mintGms(first.nonce))).status).toBe(403);
      expect(ledger.lines.at(-1)).toMatchObject({ problem: 'test_token' });
    } finally {
      await ledger.close();
    }
  });

  it('deny: a ledger that trusts another RP refuses the token (aud), and so does the login', async () => {
    const ledger = await startLedger('someotherrp00000');
    try {
      const rp = rpWithLedger(tokensKey.key, ledger.url);
      const c = await challenge(rp);
      expect((await login(rp, c.challengeId, await mintGms(c.nonce))).status).toBe(403);
      expect(denials.at(-1)).toMatchObject({ why: 'ledger refused the result token' });
      expect(ledger.lines.at(-1)).toMatchObject({ problem: 'claims' });
    } finally {
      await ledger.close();
    }
  });

  it('deny: the ledger refuses a missing, altered or foreign token; a key without result tokens gives none', async () => {
    const ledger = await startLedger(tokensKey.id);
    try {
      const post = (authorization?: string) =>
        fetch(`${ledger.url}/device-checks`, {
          method: 'POST',
          headers: authorization ? { Authorization: authorization } : {},
        });
      expect((await post()).status).toBe(401);
      // a real token, its subject changed
      const client = createAttestClient({ baseUrl: url, apiKey: tokensKey.key });
      const session = await client.init();
      const result = await client.verify({
        attestationToken: await mintGms(session.serverNonce),
        sessionReference: session.sessionReference,
      });
      expect(result.isValid).toBe(true);
      const jwt = (result as { resultToken: string }).resultToken;
      expect((await post(`Bearer ${jwt}`)).status).toBe(200);
      const [h, p, s] = jwt.split('.');
      const claims = JSON.parse(Buffer.from(p!, 'base64url').toString()) as { sub: string };
      claims.sub = 'com.example.other';
      const altered = `${h}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.${s}`;
      expect((await post(`Bearer ${altered}`)).status).toBe(403);
      expect(ledger.lines.at(-1)).toMatchObject({ problem: 'signature' });

      const plain = rpWithLedger(testKey, ledger.url);
      const c = await challenge(plain);
      expect((await login(plain, c.challengeId, await mintGms(c.nonce))).status).toBe(503);
      expect(denials.at(-1)).toMatchObject({ why: expect.stringMatching(/no result token/) });
    } finally {
      await ledger.close();
    }
  });

  it('the example runs as its own process (node examples/rp-node/server.js) and gates a login', async () => {
    const child: ChildProcess = spawn(
      process.execPath,
      [join(ROOT, 'examples', 'rp-node', 'server.js')],
      {
        cwd: ROOT,
        env: {
          PATH: process.env.PATH,
          ATTEST_URL: url,
          ATTEST_API_KEY: testKey,
          RP_ANDROID_PACKAGES: PACKAGE,
          RP_PORT: '0',
        },
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    try {
      let stderr = '';
      const rpUrl = await new Promise<string>((resolve, reject) => {
        child.stderr!.on('data', (d) => {
          stderr += d;
          const m = /rp-node listening on (http:\/\/\S+)/.exec(stderr);
          if (m) resolve(m[1]!);
        });
        child.once('exit', (code) => reject(new Error(`rp-node exited ${code}: ${stderr}`)));
      });
      const c = (await (await fetch(`${rpUrl}/login/challenge`, { method: 'POST' })).json()) as {
        challengeId: string;
        nonce: string;
      };
      const token = await mintGms(c.nonce);
      const post = (t: string) =>
        fetch(`${rpUrl}/login`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify({ challengeId: c.challengeId, attestationToken: t }),
        });
      expect((await post(token)).status).toBe(200);
    } finally {
      child.kill('SIGTERM');
      if (child.exitCode === null && child.signalCode === null) await once(child, 'exit');
    }
  });
});
