import { Readable } from 'node:stream';
/**
 * The admin API's own rules, on a server with stand-in operations: routes, methods, content
 * type, the secret, a timeout, a busy server, and the one line the CLI prints for each failure.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminError } from '../../src/admin/adminError.js';
import { startAdminServer, type AdminServer } from '../../src/admin/adminServer.js';
import { ADMIN_SOCKET_FILE } from '../../src/socketPath.js';
import { fromWire, toWire } from '../../src/admin/wire.js';
import { oneLine, runCli } from '../support/cli.js';

const SECRET = 'the-secret-of-this-run';
let root: string;
let dataDir: string;
let socket: string;
let server: AdminServer;
/** operations held until the test lets them go */
const held: (() => void)[] = [];
let heldStarted!: () => void;

function post(
  path: string,
  body: string,
  headers: Record<string, string> = {},
  method = 'POST',
): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = request({
      socketPath: socket,
      path,
      method,
      headers: {
        authorization: `Bearer ${SECRET}`,
        'content-type': 'application/json',
        ...headers,
      },
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          body: fromWire(Buffer.concat(chunks).toString('utf8')),
        }),
      );
    });
    req.on('error', reject);
    req.end(body);
  });
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'attest-adminsrv-'));
  const folder = join(root, 'sock');
  mkdirSync(folder, { mode: 0o700 });
  socket = join(folder, ADMIN_SOCKET_FILE);
  dataDir = join(root, 'data');
  mkdirSync(dataDir, { mode: 0o700 });
  server = await startAdminServer(
    socket,
    {
      secret: SECRET,
      async execute(name, input, actor, audit) {
        if (name === 'keys.list') return [{ id: 'k', createdAt: new Date(0), actor }];
        if (name === 'keys.find') throw new AdminError('negative', 'no such key');
        if (name === 'db.status') {
          heldStarted();
          await new Promise<void>((resolve) => held.push(resolve));
          return [];
        }
        if (name === 'keys.revoke') {
          audit({
            id: 1,
            at: new Date(0),
            actor: actor ?? '?',
            action: 'keys.revoke',
            target: 'k',
            before: null,
            after: null,
            seq: 1,
            prevHash: '0'.repeat(64),
            hash: 'f'.repeat(64),
          });
          return { revoked: true, input };
        }
        throw new Error('boom at a secret place');
      },
      backup: () => Readable.from([Buffer.from([0x1f, 0x8b, 1, 2, 3])]),
    },
    { timeoutMs: 200, maxInFlight: 1 },
  );
  delete process.env.DATABASE_URL;
  process.env.ATTEST_DATA_DIR = dataDir;
  writeFileSync(
    join(dataDir, 'attest.lock'),
    JSON.stringify({ pid: process.pid, admin: { socket, secret: SECRET } }),
    { mode: 0o600 },
  );
});
afterAll(async () => {
  for (const release of held) release();
  await server?.stop();
  rmSync(root, { recursive: true, force: true });
  delete process.env.ATTEST_DATA_DIR;
});

describe('the admin API', () => {
  it('answers an operation with its result and audit events; dates and bytes come back as such', async () => {
    const res = await post('/v1/op', toWire({ op: 'keys.list', input: {}, actor: 'alice' }));
    expect(res).toEqual({
      status: 200,
      body: { ok: true, result: [{ id: 'k', createdAt: new Date(0), actor: 'alice' }], audit: [] },
    });
  });

  it.each([
    ['an unknown route', '/v1/sql', '{}', {}, 'POST', 404],
    ['GET', '/v1/op', '', {}, 'GET', 405],
    ['text/plain', '/v1/op', '{}', { 'content-type': 'text/plain' }, 'POST', 415],
    ['no secret', '/v1/op', '{}', { authorization: '' }, 'POST', 401],
    ['not JSON', '/v1/op', '{"op":', {}, 'POST', 400],
    ['an unknown operation', '/v1/op', '{"op":"query","input":{}}', {}, 'POST', 404],
    ['an extra field', '/v1/op', '{"op":"keys.list","input":{},"sql":"x"}', {}, 'POST', 400],
    [
      'an actor with a control character',
      '/v1/op',
      '{"op":"keys.list","input":{},"actor":"a\\u0007"}',
      {},
      'POST',
      400,
    ],
  ])('%s: HTTP %s with a JSON error', async (_, path, body, headers, method, status) => {
    const res = await post(path, body, headers, method);
    expect(res.status).toBe(status);
    expect(res.body).toMatchObject({ ok: false, error: { kind: expect.any(String) } });
  });

  it('an unexpected failure is a 500 with the cleaned message', async () => {
    const res = await post('/v1/op', toWire({ op: 'keys.create', input: {} }));
    expect(res.status).toBe(500);
    expect(res.body).toMatchObject({ error: { kind: 'runtime' } });
  });
});

describe('the CLI against it', () => {
  it('an expected failure keeps its exit code and its one line', async () => {
    const run = await runCli('keys', 'revoke', 'aaaaaaaaaaaaaaaa', '--yes');
    expect(run.code).toBe(1);
    expect(oneLine(run)).toBe('attest: no such key');
  });

  it('an operation over the server’s time limit: exit 3, one line; a second one meanwhile is told the server is busy', async () => {
    const started = new Promise<void>((resolve) => (heldStarted = resolve));
    const slow = runCli('db', 'status');
    await started;
    const busy = await post('/v1/op', toWire({ op: 'keys.list', input: {} }));
    expect(busy.status).toBe(503);
    expect(busy.body).toMatchObject({ error: { message: expect.stringMatching(/busy/) } });
    const run = await slow;
    expect(run.code).toBe(3);
    expect(oneLine(run)).toMatch(/^attest: the running attest serve did not finish within 200 ms$/);
    for (const release of held.splice(0)) release();
  });

  it('a server that is gone (its socket left behind, nobody listening): exit 3 and one line', async () => {
    const gone = join(root, 'gone');
    mkdirSync(gone, { mode: 0o700 });
    const path = join(gone, ADMIN_SOCKET_FILE);
    // a process killed while listening leaves its socket file behind
    spawnSync(process.execPath, [
      '-e',
      `require('node:net').createServer().listen(${JSON.stringify(path)}, () => process.kill(process.pid, 'SIGKILL'))`,
    ]);
    chmodSync(path, 0o600);
    writeFileSync(
      join(dataDir, 'attest.lock'),
      JSON.stringify({ pid: process.pid, admin: { socket: path, secret: SECRET } }),
      { mode: 0o600 },
    );
    try {
      const run = await runCli('keys', 'list');
      expect(run.code).toBe(3);
      expect(oneLine(run)).toMatch(
        /^attest: the running "attest serve" \(process \d+\) cannot be reached on its admin socket \(ECONNREFUSED\): it may be stopping; try again$/,
      );
    } finally {
      writeFileSync(
        join(dataDir, 'attest.lock'),
        JSON.stringify({ pid: process.pid, admin: { socket, secret: SECRET } }),
        { mode: 0o600 },
      );
    }
  });

  it('a wrong secret in the lock: exit 3, one line', async () => {
    writeFileSync(
      join(dataDir, 'attest.lock'),
      JSON.stringify({ pid: process.pid, admin: { socket, secret: 'stale' } }),
      { mode: 0o600 },
    );
    try {
      const run = await runCli('keys', 'list');
      expect(run.code).toBe(3);
      expect(oneLine(run)).toMatch(/^attest: not authorized: the secret does not match this run/);
    } finally {
      writeFileSync(
        join(dataDir, 'attest.lock'),
        JSON.stringify({ pid: process.pid, admin: { socket, secret: SECRET } }),
        { mode: 0o600 },
      );
    }
  });
});
