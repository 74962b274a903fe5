/**
 * `attest dev up` as an RP developer runs it: one command starts the service with a test key,
 * the development CA and an example app, and two more (mint, verify) reach `isValid: true`.
 * A second run reuses the key; a data dir holding live keys is refused; Ctrl-C stops it.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { baseEnv, BIN, buildOnce, oneLine, runBin } from '../support/binary.js';
import { it } from '../support/fixtures.js';

interface DevUp {
  url: string;
  key: string;
  keyId: string;
  dataDir: string;
  appId: string;
  issuer: string;
  jwksUrl: string;
  created: { key: boolean; devCa: boolean; app: boolean };
  next: string[];
}

/** Starts `dev up`; resolves with what it printed (once its stdout holds a whole document) and a stop function. */
function devUp(args: string[], env: NodeJS.ProcessEnv, cwd: string) {
  const child = spawn(process.execPath, [BIN, 'dev', 'up', ...args], {
    env,
    cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const printed = new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (d) => {
      stdout += d;
      // the JSON document ends with a closing brace on its own line; the text with the next commands
      if (/^\}\n/m.test(stdout) || /# {3}curl .*\n/.test(stdout)) resolve(stdout);
    });
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (code) => reject(new Error(`dev up exited ${code}: ${stderr}`)));
  });
  return {
    printed,
    exited,
    stderr: () => stderr,
    stop: async () => {
      child.kill('SIGINT');
      return exited;
    },
  };
}

describe('attest dev up', { timeout: 90_000 }, () => {
  let dir: string;
  let env: NodeJS.ProcessEnv;

  beforeAll(() => {
    buildOnce();
    dir = mkdtempSync(join(tmpdir(), 'attest-devup-'));
    env = baseEnv();
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('starts ready with a test key and the development CA; mint and verify give isValid: true', async () => {
    const run = devUp(['--data-dir', join(dir, 'dev'), '--port', '0', '--json'], env, dir);
    const info = JSON.parse(await run.printed) as DevUp;
    try {
      expect(info.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(info.created).toEqual({ key: true, devCa: true, app: true });
      expect(info.next).toHaveLength(3);
      // printed only once ready: the first request already answers
      expect((await fetch(`${info.url}/readyz`)).status).toBe(200);

      // the two commands it names, in a second shell that exported ATTEST_DATA_DIR
      const shell = { ...env, ATTEST_DATA_DIR: info.dataDir };
      const nonce = Buffer.from('dev up nonce, 32 bytes at least!').toString('base64');
      const mint = await runBin(
        [
          'dev',
          'mint',
          'apple',
          '--app-id',
          info.appId,
          '--device',
          join(dir, 'dev-iphone.json'),
          '--nonce',
          nonce,
        ],
        shell,
        { cwd: dir },
      );
      expect(mint.code, mint.stderr).toBe(0);
      const res = await fetch(`${info.url}/api/v1/attestation/verify`, {
        method: 'POST',
        headers: { 'X-Api-Key': info.key, 'Content-Type': 'application/json' },
        body: JSON.stringify({ attestationToken: mint.stdout.trim(), expectedNonce: nonce }),
      });
      const body = (await res.json()) as { isValid: boolean; resultToken?: string };
      expect(body).toMatchObject({ isValid: true, statusCode: 0 });

      // its result token: iss its own URL, verified with jose against its own (test) JWKS
      expect(info.issuer).toBe(info.url);
      expect(info.jwksUrl).toBe(`${info.url}/.well-known/jwks-test.json`);
      const discovery = (await (
        await fetch(`${info.url}/.well-known/openid-configuration`)
      ).json()) as Record<string, string>;
      expect(discovery.attest_test_jwks_uri).toBe(info.jwksUrl);
      const { payload } = await jwtVerify(
        body.resultToken!,
        createRemoteJWKSet(new URL(info.jwksUrl)),
        { issuer: info.url, audience: info.keyId, algorithms: ['ES256'], typ: 'attest-result+jwt' },
      );
      expect(payload).toMatchObject({
        iss: info.url,
        aud: info.keyId,
        service: 'apple',
        test: true,
      });
      // a verifier of the live keys refuses it
      await expect(
        jwtVerify(
          body.resultToken!,
          createRemoteJWKSet(new URL(`${info.url}/.well-known/jwks.json`)),
          {
            issuer: info.url,
          },
        ),
      ).rejects.toMatchObject({ code: 'ERR_JWKS_NO_MATCHING_KEY' });
    } finally {
      expect(await run.stop()).toBe(0);
    }
  });

  it('a second run on the same data dir reuses its key and CA, and prints URL= and KEY= lines', async () => {
    const run = devUp(['--data-dir', join(dir, 'dev'), '--port', '0'], env, dir);
    const text = await run.printed;
    try {
      expect(text).toMatch(/^URL=http:\/\/127\.0\.0\.1:\d+\nKEY=attest_\S+\nATTEST_DATA_DIR=/);
      expect(text).toContain('test key');
      expect(text).not.toContain('(new)');
      const key = /^KEY=(\S+)$/m.exec(text)![1]!;
      const url = /^URL=(\S+)$/m.exec(text)![1]!;
      const res = await fetch(`${url}/api/v1/attestation/init`, {
        method: 'POST',
        headers: { 'X-Api-Key': key },
      });
      expect(res.status).toBe(200);
    } finally {
      expect(await run.stop()).toBe(0);
    }
  });

  it('refuses a data dir that holds live API keys (exit 2, one line)', async ({ dataDir }) => {
    const live = { ...env, ...dataDir.env };
    const created = await runBin(['keys', 'create', '--name', 'prod', '--json'], live);
    expect(created.code, created.stderr).toBe(0);
    const id = (JSON.parse(created.stdout) as { id: string }).id;
    const run = devUp(['--data-dir', dataDir.path, '--port', '0'], env, dir);
    run.printed.catch(() => {});
    expect(await run.exited).toBe(2);
    const line = oneLine({ stderr: run.stderr() });
    expect(line).toContain('holds live API keys');
    expect(line).toContain(id);
    expect(line).toContain('attest dev up --help');
  });

  it('refuses DATABASE_URL: dev up is embedded only', async () => {
    const run = await runBin(
      ['dev', 'up', '--port', '0'],
      { ...env, DATABASE_URL: 'postgres://nobody@127.0.0.1:1/x' },
      { cwd: dir },
    );
    expect(run.code).toBe(2);
    expect(oneLine(run)).toContain('DATABASE_URL');
  });
});
