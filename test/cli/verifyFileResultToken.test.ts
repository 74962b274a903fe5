/**
 * `attest verify-file` given a result token, offline with --jwks FILE: signature, claims,
 * issuer, audience, nonce and lifetime (--at), each a step; exit 0 valid, 1 rejected, 2 bad input.
 * (Against the database's keys: test/cli/resultTokens.test.ts.)
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignJWT, importPKCS8 } from 'jose';
import { lowSJws } from '../../src/core/ecdsaLowS.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  newResultSigningKey,
  publicJwk,
  resultClaims,
  RESULT_TOKEN_TYPE,
} from '../../src/core/resultToken.js';
import { oneLine, runCli } from '../support/cli.js';

const ISSUER = 'https://attest.example.com';
const AUDIENCE = '0h3k5x9q2m7c1b4n';
const IAT = Date.parse('2026-03-01T10:00:00Z') / 1000;

describe('verify-file with a result token', () => {
  let dir: string;
  let jwksFile: string;
  let otherJwksFile: string;
  let sign: (claims: object, kid?: string) => Promise<string>;
  const nonce = randomBytes(32);
  const file = (name: string, text: string) => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'attest-vfrt-'));
    const key = await newResultSigningKey();
    const other = await newResultSigningKey();
    jwksFile = file('jwks.json', JSON.stringify({ keys: [publicJwk(key.id, key.publicKey)] }));
    // another key under the same kid: a forgery's key set
    otherJwksFile = file(
      'other.json',
      JSON.stringify({ keys: [publicJwk(key.id, other.publicKey)] }),
    );
    const pem = `-----BEGIN PRIVATE KEY-----\n${Buffer.from(key.privateKey).toString('base64')}\n-----END PRIVATE KEY-----`;
    const privateKey = await importPKCS8(pem, 'ES256');
    // as the service signs: the low-S form (a high-S twin is refused)
    sign = async (claims, kid = key.id) =>
      lowSJws(
        await new SignJWT(claims as Record<string, unknown>)
          .setProtectedHeader({ alg: 'ES256', typ: RESULT_TOKEN_TYPE, kid })
          .sign(privateKey),
      );
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const claims = () =>
    resultClaims({
      issuer: ISSUER,
      apiKeyId: AUDIENCE,
      approach: 'sessionless',
      nonce,
      details: {
        service: 'gms',
        googleTokenDetails: {
          packageName: 'com.example.app',
          deviceIntegrityVerdicts: ['MEETS_DEVICE_INTEGRITY'],
          timestampMillis: IAT * 1000,
        },
      },
      now: IAT,
      ttlSeconds: 300,
      jti: 'a1b2c3',
    });
  const at = (seconds: number) => new Date((IAT + seconds) * 1000).toISOString();

  it('a valid token: every step passes, its claims and expiry are shown (exit 0)', async () => {
    const path = file('ok.jwt', `${await sign(claims())}\n`);
    const run = await runCli(
      'verify-file',
      path,
      '--jwks',
      jwksFile,
      '--issuer',
      ISSUER,
      '--audience',
      AUDIENCE,
      '--nonce',
      nonce.toString('base64'),
      '--at',
      at(60),
    );
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/\[pass\] signature: ES256 signature verifies/);
    expect(run.stdout).toMatch(/\[pass\] expiry: expires at 2026-03-01T10:05:00.000Z \(in 240 s\)/);
    expect(run.stdout).toMatch(/sub: com\.example\.app/);
    expect(run.stdout).toMatch(/VALID$/m);

    const json = await runCli('verify-file', path, '--jwks', jwksFile, '--at', at(60), '--json');
    expect(json.code).toBe(0);
    const doc = JSON.parse(json.stdout) as Record<string, unknown>;
    expect(doc).toMatchObject({
      valid: true,
      kind: 'result-token',
      keys: 'jwks-file',
      expiresAt: '2026-03-01T10:05:00.000Z',
      claims: { aud: AUDIENCE, iss: ISSUER, service: 'gms' },
    });
    // without --issuer, --audience or --nonce those steps say they were not checked
    expect(doc.checks).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ id: 'issuer', status: 'skip' }),
        expect.objectContaining({ id: 'audience', status: 'skip' }),
        expect.objectContaining({ id: 'nonce', status: 'skip' }),
      ]),
    );
  });

  it.each([
    [
      'expired at --at',
      () => claims(),
      [['--at', at(300)]],
      /expiry: expired at 2026-03-01T10:05:00/,
    ],
    ['issued after --at', () => claims(), [['--at', at(-10)]], /expiry: issued at/],
    [
      'another audience',
      () => claims(),
      [['--audience', 'zzzzzzzzzzzzzzzz']],
      /audience: aud 0h3k5x9q2m7c1b4n, expected zzzz/,
    ],
    [
      'another issuer',
      () => claims(),
      [['--issuer', 'https://other.example']],
      /issuer: iss https:\/\/attest\.example\.com, expected/,
    ],
    [
      'another nonce',
      () => claims(),
      [['--nonce', randomBytes(32).toString('base64')]],
      /nonce: the token was made for another nonce/,
    ],
    [
      'an extra claim',
      () => ({ ...claims(), reason: 'apple_counter_replayed' }),
      [],
      /claims: claims not in a result token: reason/,
    ],
    [
      'a missing claim',
      () => {
        const { jti: _, ...c } = claims();
        return c;
      },
      [],
      /claims: missing claims: jti/,
    ],
  ])('rejected (exit 1), naming the step: %s', async (_name, make, flags, message) => {
    const path = file('bad.jwt', await sign(make()));
    const run = await runCli(
      'verify-file',
      path,
      '--jwks',
      jwksFile,
      '--at',
      at(60),
      ...flags.flat(),
    );
    expect(run.code, run.stderr).toBe(1);
    expect(run.stdout).toMatch(message);
    expect(run.stdout).toMatch(/^REJECTED: /m);
  });

  it('a forged signature and an unknown kid are rejected (exit 1)', async () => {
    const path = file('forged.jwt', await sign(claims()));
    const forged = await runCli('verify-file', path, '--jwks', otherJwksFile, '--at', at(60));
    expect(forged.code).toBe(1);
    expect(forged.stdout).toMatch(/signature: the signature does not verify with that key/);
    const unknown = file('unknown.jwt', await sign(claims(), 'nosuchkid'));
    const run = await runCli('verify-file', unknown, '--jwks', jwksFile, '--at', at(60), '--json');
    expect(run.code).toBe(1);
    expect(JSON.parse(run.stdout)).toMatchObject({
      valid: false,
      checks: expect.arrayContaining([expect.objectContaining({ id: 'key', status: 'fail' })]),
    });
  });

  it('bad input is exit 2 with one line', async () => {
    const token = file('t.jwt', await sign(claims()));
    const cases: [string[], RegExp][] = [
      [['--jwks', join(dir, 'missing.json')], /--jwks: cannot read .*missing\.json \(ENOENT\)/],
      [['--jwks', file('notjson.json', 'nope')], /is not JSON: give the key set/],
      [['--jwks', file('nokeys.json', '{"k": 1}')], /has no "keys" array/],
      [
        ['--app-id', 'ABCDE12345.com.example'],
        /--app-id is for attestation tokens; this is a result token/,
      ],
      [['--at', 'yesterday'], /--at/],
    ];
    for (const [flags, message] of cases) {
      const run = await runCli('verify-file', token, ...flags);
      expect(run.code, `${flags.join(' ')}: ${run.stderr}`).toBe(2);
      expect(oneLine(run)).toMatch(message);
    }
    // result-token flags with an attestation token
    const cbor = file('token.b64', 'oWF2AQ==');
    const run = await runCli('verify-file', cbor, '--jwks', jwksFile);
    expect(run.code).toBe(2);
    expect(oneLine(run)).toMatch(/--jwks is for result tokens \(a JWT\)/);
  });
});
