/**
 * The findings against the old shared socket (a PostgreSQL wire-protocol front on PGlite's one
 * session), replayed against the running server's admin socket: each is impossible now. The
 * server runs in this process on a real embedded data dir; the CLI runs in-process (runCli).
 */
import { randomBytes } from 'node:crypto';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import postgres from 'postgres';
import { afterAll, describe, expect } from 'vitest';
import { apiKeyCheck, generateApiKey, hashApiKey } from '../../src/core/apiKeys.js';
import { loadConfig } from '../../src/config.js';
import { createAppleKeyRepository } from '../../src/db/appleKeys.js';
import { openDatabase } from '../../src/db/client.js';
import { rowsOf } from '../../src/db/database.js';
import { createSessionRepository } from '../../src/db/sessions.js';
import { startServer, type RunningServer } from '../../src/server/start.js';
import { oneLine, runCli } from '../support/cli.js';
import { captureLogger, issueKey } from '../support/service.js';
import { it } from '../support/fixtures.js';

interface Lock {
  pid: number;
  admin: { socket: string; secret: string };
}

/** node:http's answer to bytes that are not HTTP */
const REFUSED = /^HTTP\/1\.1 400 /;

let root: string;
let data: string;
let server: RunningServer;
const dataDir = () => data;
const lock = () => JSON.parse(readFileSync(join(dataDir(), 'attest.lock'), 'utf8')) as Lock;

async function start(): Promise<RunningServer> {
  const { logger } = captureLogger();
  return startServer(loadConfig({ port: 0, host: '127.0.0.1' }), logger, { migrate: true });
}

/** What a raw client gets back on the admin socket for `bytes`: the answer and that it closed. */
function rawExchange(bytes: Buffer): Promise<{ answer: string; closed: boolean }> {
  return new Promise((resolve, reject) => {
    const socket = connect(lock().admin.socket);
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () =>
      resolve({ answer: Buffer.concat(chunks).toString('latin1'), closed: true }),
    );
    socket.on('connect', () => socket.write(bytes));
  });
}

/** A PostgreSQL message: type byte, int32 length (itself included), body. */
function pgMessage(type: string, body: Buffer): Buffer {
  const head = Buffer.alloc(5);
  head.write(type, 0, 'latin1');
  head.writeInt32BE(4 + body.length, 1);
  return Buffer.concat([head, body]);
}

/** A protocol-3 startup packet, as psql sends first. */
function startupPacket(): Buffer {
  const params = Buffer.from('user\0postgres\0database\0postgres\0\0', 'latin1');
  const packet = Buffer.alloc(8 + params.length);
  packet.writeInt32BE(packet.length, 0);
  packet.writeInt32BE(196608, 4);
  params.copy(packet, 8);
  return packet;
}

const query = (text: string) => pgMessage('Q', Buffer.from(`${text}\0`, 'utf8'));

/**
 * postgres.js trying `text` on the admin socket. Refused before it is ready, postgres.js connects
 * again and again (it never gives up on a first connection), so the attempt is watched through its
 * sockets: after the server has answered and closed two of them, the query has not run. Returns
 * 'ran', or the first bytes the server sent.
 */
async function sqlAttempt(text: string): Promise<string> {
  const answers: string[] = [];
  let closes = 0;
  let refusedTwice!: () => void;
  const twice = new Promise<void>((resolve) => (refusedTwice = resolve));
  const client = postgres({
    // postgres.js takes a socket factory (connection.js), which its types leave out
    ...({
      socket: () =>
        new Promise((resolve, reject) => {
          const socket = connect(lock().admin.socket);
          socket.on('data', (c: Buffer) => answers.push(c.toString('latin1')));
          socket.on('close', () => {
            if (++closes === 2) refusedTwice();
          });
          socket.once('connect', () => resolve(socket));
          socket.once('error', reject);
        }),
    } as object),
    username: 'postgres',
    database: 'postgres',
    max: 1,
    onnotice: () => {},
  });
  let ran = false;
  const attempt = client.unsafe(text).then(
    () => (ran = true),
    () => {},
  );
  await Promise.race([twice, attempt]);
  await client.end({ timeout: 0 });
  await attempt;
  return ran ? 'ran' : answers.join('').slice(0, 40);
}

/** A POST to the admin API with the right secret and any body. */
async function adminPost(
  body: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; text: string }> {
  const { request } = await import('node:http');
  return new Promise((resolve, reject) => {
    const req = request({
      socketPath: lock().admin.socket,
      path: '/v1/op',
      method: 'POST',
      headers: {
        authorization: `Bearer ${lock().admin.secret}`,
        'content-type': 'application/json',
        ...headers,
      },
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }),
      );
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** The server's own session state is the default one, outside any transaction. */
async function sessionIsClean(): Promise<void> {
  const [row] = rowsOf<{ datestyle: string; readonly: string; prepared: number }>(
    await server.database.db.execute(sql`
      select current_setting('DateStyle') as datestyle,
             current_setting('default_transaction_read_only') as readonly,
             -- the driver's own (protocol-level) statements are not a client's PREPARE
             (select count(*)::int from pg_prepared_statements where from_sql) as prepared`),
  );
  expect(row).toEqual({ datestyle: 'ISO, MDY', readonly: 'off', prepared: 0 });
  // VACUUM cannot run inside a transaction block: none is left open
  await server.database.db.execute(sql`vacuum api_keys`);
}

async function apiAnswers(key: string): Promise<number> {
  const res = await fetch(`${server.url}/api/v1/attestation/init`, {
    method: 'POST',
    headers: { 'X-Api-Key': key },
  });
  return res.status;
}

it.beforeAll(async ({ cliDataDir, tempDir }) => {
  root = tempDir;
  data = cliDataDir.path;
  server = await start();
}, 120_000);
afterAll(async () => {
  await server?.close();
});

describe('finding 1: a client transaction cannot enclose the server’s writes', () => {
  it('START TRANSACTION and ROLLBACK from a PostgreSQL client do not run: a consumed session stays consumed', async () => {
    const { id } = await issueKey(server.database);
    const sessions = createSessionRepository(server.database.db);
    const reference = randomBytes(16).toString('hex');
    await sessions.create({
      reference,
      apiKeyId: id,
      serverNonce: randomBytes(32),
      ttlSeconds: 300,
    });
    expect(await sqlAttempt('START TRANSACTION')).toMatch(REFUSED);
    expect((await sessions.consume(reference, id)).ok).toBe(true);
    expect(await sqlAttempt('ROLLBACK')).toMatch(REFUSED);
    expect(await sqlAttempt('COMMIT AND CHAIN')).toMatch(REFUSED);
    expect(await sessions.consume(reference, id)).toEqual({
      ok: false,
      reason: 'session_consumed',
    });
    await sessionIsClean();
  });

  it('a revocation through the server applies at once and survives a clean restart, with its audit event', async () => {
    const created = JSON.parse(
      (await runCli('keys', 'create', '--name', 'to revoke', '--json')).stdout,
    ) as { id: string; key: string };
    expect(await apiAnswers(created.key)).toBe(200);
    expect(await sqlAttempt('START TRANSACTION')).toMatch(REFUSED);
    const revoke = await runCli('--actor', 'alice', 'keys', 'revoke', created.id, '--yes');
    expect(revoke.code, revoke.stderr).toBe(0);
    // the server reloaded its key cache before the command returned: no 5 s window
    expect(await apiAnswers(created.key)).toBe(403);
    expect(await sqlAttempt('ROLLBACK')).toMatch(REFUSED);
    await server.close();
    server = await start();
    expect(await apiAnswers(created.key)).toBe(403);
    const keys = JSON.parse((await runCli('keys', 'list', '--json')).stdout) as {
      id: string;
      state: string;
    }[];
    expect(keys.find((k) => k.id === created.id)?.state).toBe('revoked');
    const audit = JSON.parse(
      (await runCli('audit', 'list', '--action', 'keys.revoke', '--json')).stdout,
    ) as { actor: string; target: string }[];
    expect(audit).toContainEqual(expect.objectContaining({ actor: 'alice', target: created.id }));
  }, 120_000);

  it('android revocations update FILE while serve runs: stored through the server, shown, audited', async () => {
    const file = join(root, 'status.json');
    writeFileSync(
      file,
      JSON.stringify({ entries: { c35747a084470c3135aeefe2b8d40cd6: { status: 'REVOKED' } } }),
    );
    const update = await runCli(
      '--actor',
      'alice',
      'android',
      'revocations',
      'update',
      file,
      '--json',
    );
    expect(update.code, update.stderr).toBe(0);
    expect(JSON.parse(update.stdout)).toEqual({ entries: 1, stored: true });
    const show = await runCli('android', 'revocations', 'show', '--json');
    expect(show.code, show.stderr).toBe(0);
    expect(JSON.parse(show.stdout)).toMatchObject({ source: `file ${file}`, entries: 1 });
    const audit = JSON.parse(
      (await runCli('audit', 'list', '--action', 'android.revocations.update', '--json')).stdout,
    ) as { actor: string; target: string }[];
    expect(audit).toContainEqual(
      expect.objectContaining({ actor: 'alice', target: 'status list' }),
    );
  }, 120_000);
});

describe('finding 2: a malformed frame cannot spin the server', () => {
  it.each([
    ['Q with length -1', Buffer.from([0x51, 0xff, 0xff, 0xff, 0xff])],
    ['a startup packet', startupPacket()],
    ['64 KiB of garbage', randomBytes(64 * 1024)],
  ])('%s: an HTTP 400 and a close; /healthz and the API keep answering', async (_, bytes) => {
    const { key } = await issueKey(server.database);
    const { answer, closed } = await rawExchange(bytes);
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(closed).toBe(true);
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    expect(await apiAnswers(key)).toBe(200);
    expect((await runCli('keys', 'list', '--json')).code).toBe(0);
  });

  it('a body over the limit is answered 413, and the server goes on', async () => {
    const big = JSON.stringify({ op: 'keys.list', input: {}, pad: 'x'.repeat(2 * 1024 * 1024) });
    const res = await adminPost(big);
    expect(res.status).toBe(413);
    expect(JSON.parse(res.text)).toMatchObject({ ok: false, error: { kind: 'usage' } });
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
  });
});

describe('finding 3: no message can break the database for good', () => {
  it('COPY FROM STDIN and an unknown message type after a startup are refused; /readyz and the API stay up', async () => {
    const { key } = await issueKey(server.database);
    for (const bytes of [
      Buffer.concat([startupPacket(), query('COPY api_keys FROM STDIN')]),
      Buffer.concat([startupPacket(), pgMessage('x', Buffer.alloc(3))]),
    ]) {
      const { answer } = await rawExchange(bytes);
      expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    }
    expect(await sqlAttempt('COPY api_keys FROM STDIN')).toMatch(REFUSED);
    expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
    expect(await apiAnswers(key)).toBe(200);
    await sessionIsClean();
  });
});

describe('finding 4: nothing a client sends leaves session state behind', () => {
  it('SET, a Parse without Sync, an idle BEGIN: none reaches the database, and an expired key stays refused', async () => {
    const valid = await issueKey(server.database);
    const expired = await issueKey(server.database);
    await server.database.db.execute(
      sql`update api_keys set expires_at = now() - interval '1 hour' where id = ${expired.id}`,
    );
    for (const text of [
      "SET DateStyle='SQL, DMY'",
      'SET default_transaction_read_only=on',
      'BEGIN',
    ])
      expect(await sqlAttempt(text)).toMatch(REFUSED);
    const parseOnly = pgMessage('P', Buffer.from('\0select 1\0\0\0', 'latin1'));
    expect((await rawExchange(Buffer.concat([startupPacket(), parseOnly]))).answer).toMatch(
      /^HTTP\/1\.1 400 /,
    );
    // the typed API has no door for SQL: no operation runs text, and inputs take no extra fields
    const noSuchOp = await adminPost(
      JSON.stringify({ op: 'sql', input: { text: "SET DateStyle='SQL, DMY'" } }),
    );
    expect(noSuchOp.status).toBe(404);
    const extra = await adminPost(
      JSON.stringify({ op: 'keys.list', input: { text: "SET DateStyle='SQL, DMY'" } }),
    );
    expect(extra.status).toBe(400);
    expect(JSON.parse(extra.text)).toMatchObject({ error: { kind: 'usage' } });
    await sessionIsClean();
    expect(await apiAnswers(expired.key)).toBe(403);
    expect(await apiAnswers(valid.key)).toBe(200);
  });

  it('a request without the secret of this run is refused before it is read', async () => {
    const wrong = await adminPost(JSON.stringify({ op: 'keys.list', input: {} }), {
      authorization: 'Bearer not-the-secret',
    });
    expect(wrong.status).toBe(401);
    const none = await adminPost(JSON.stringify({ op: 'keys.list', input: {} }), {
      authorization: '',
    });
    expect(none.status).toBe(401);
  });
});

describe("the admin API applies the CLI's own rules", () => {
  const create = (input: Record<string, unknown>) =>
    adminPost(JSON.stringify({ op: 'keys.create', input, actor: 'ops' }));
  const made = generateApiKey('attest');
  const valid = async () => ({
    id: made.id,
    name: 'rp',
    hash: await hashApiKey(made.key),
    precheck: apiKeyCheck(made.key),
    expiresInSeconds: null,
    mode: 'live',
    resultTokens: false,
  });
  const stored = async (id: string) =>
    rowsOf(await server.database.db.execute(sql`select id from api_keys where id = ${id}`));

  it.each([
    ['a bidi override', 'pay\u202ements'],
    ['a C1 control', 'pay\u009bments'],
    ['surrounding spaces', ' payments '],
  ])(
    'a key name with %s is refused (400, usage), as keys create refuses it; nothing stored',
    async (_, name) => {
      const res = await create({ ...(await valid()), name });
      expect(res.status).toBe(400);
      expect(JSON.parse(res.text)).toMatchObject({
        ok: false,
        error: { kind: 'usage', message: expect.stringMatching(/name must be 1 to 100 printable/) },
      });
      expect(await stored(made.id)).toEqual([]);
    },
  );

  it.each([
    ['$argon2id$x'],
    [
      '$argon2id$v=19$m=4194304,t=2,p=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g',
    ],
    [
      '$argon2i$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g',
    ],
  ])('a stored hash %s is refused (400, usage); nothing stored', async (hash) => {
    const res = await create({ ...(await valid()), hash });
    expect(res.status).toBe(400);
    expect(JSON.parse(res.text)).toMatchObject({
      error: { kind: 'usage', message: expect.stringMatching(/hash is not an argon2id hash/) },
    });
    expect(await stored(made.id)).toEqual([]);
  });

  it.each([
    ['an empty scope', []],
    ['an entry that is neither an app ID nor a package', ['bank']],
    ['an empty entry', ['com.example.bank', '']],
    ['more than 64 entries', Array.from({ length: 65 }, (_, i) => `com.example.app${i}`)],
  ])(
    'a key scope with %s is refused (400, usage), as keys create refuses it; nothing stored',
    async (_, apps) => {
      const res = await create({ ...(await valid()), apps });
      expect(res.status).toBe(400);
      expect(JSON.parse(res.text)).toMatchObject({ ok: false, error: { kind: 'usage' } });
      expect(await stored(made.id)).toEqual([]);
    },
  );

  it('keys.setApps refuses an empty scope and answers found: false for an unknown key', async () => {
    const setApps = (input: Record<string, unknown>) =>
      adminPost(JSON.stringify({ op: 'keys.setApps', input, actor: 'ops' }));
    expect((await setApps({ id: '0000000000000000', apps: [] })).status).toBe(400);
    const unknown = await setApps({ id: '0000000000000000', apps: ['com.example.bank'] });
    expect(unknown.status).toBe(200);
    expect(JSON.parse(unknown.text)).toMatchObject({ ok: true, result: { found: false } });
  });

  it('what the CLI sends is taken, and the key works at once', async () => {
    const res = await create(await valid());
    expect(res.status).toBe(200);
    expect(await apiAnswers(made.key)).toBe(200);
    // neither the hash nor the pre-check is ever answered
    for (const text of [
      res.text,
      (await adminPost(JSON.stringify({ op: 'keys.find', input: { id: made.id } }))).text,
      (await adminPost(JSON.stringify({ op: 'keys.list', input: {} }))).text,
    ]) {
      expect(text).toContain(made.id);
      // the audit event's chain hashes (docs/audit.md) are public: everything else is checked
      const answered = text.replace(/"(prevHash|hash)":"[0-9a-f]{64}"/g, '');
      expect(answered).not.toMatch(/hash|precheck|argon2|hs256/);
    }
  });
});

describe('clients that hold the admin socket open', () => {
  /** a client that sends part of a request head and then nothing: resolves when the server closes it */
  function trickler(): Promise<{ connected: Promise<void>; closed: Promise<void> }> {
    return new Promise((resolve) => {
      const socket = connect(lock().admin.socket);
      socket.on('error', () => {});
      socket.resume(); // reads what the server answers, so its close is seen
      const closed = new Promise<void>((r) => socket.once('close', () => r()));
      const connected = new Promise<void>((r) =>
        socket.once('connect', () => {
          socket.write('POST /v1/op HTTP/1.1\r\nHost: x\r\n');
          r();
        }),
      );
      resolve({ connected, closed });
    });
  }

  it('100 connections trickling their request do not lock the CLI out; each is cut off by the head deadline', async () => {
    const clients = await Promise.all(Array.from({ length: 100 }, () => trickler()));
    await Promise.all(clients.map((c) => c.connected));
    let closedSoFar = 0;
    for (const c of clients) void c.closed.then(() => closedSoFar++);
    const run = await runCli('keys', 'list', '--json');
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(Array.isArray(JSON.parse(run.stdout))).toBe(true);
    // the oldest were closed to make room; the others end at the 2 s head deadline (waited by their close)
    expect(closedSoFar).toBeGreaterThan(0);
    await Promise.all(clients.map((c) => c.closed));
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
  });
});

describe('backup and restore while the server runs', () => {
  it('round-trips API keys, the allowlist with sealed key pairs, registered App Attest keys and the audit trail', async () => {
    const key = JSON.parse(
      (await runCli('--actor', 'bob', 'keys', 'create', '--name', 'backed up', '--json')).stdout,
    ) as { id: string };
    expect((await runCli('allowlist', 'add', 'apple', 'ABCDE12345.com.example.bank')).code).toBe(0);
    expect(
      (await runCli('allowlist', 'add', 'android', 'com.example.bank', '--without-keys')).code,
    ).toBe(0);
    // a package's first mint adds a test-only key pair, sealed with the master key
    const minted = await runCli(
      'dev',
      'mint',
      'gms',
      '--package',
      'com.example.bank',
      '--nonce',
      randomBytes(32).toString('base64'),
    );
    expect(minted.code, minted.stderr).toBe(0);
    const appleKey = {
      keyId: randomBytes(32),
      publicKey: randomBytes(91),
      appId: 'ABCDE12345.com.example.bank',
      environment: 'Production' as const,
      counter: 7,
    };
    expect(await createAppleKeyRepository(server.database.db).register(appleKey)).toBe(true);

    const before = {
      keys: (await runCli('keys', 'list', '--json')).stdout,
      allowlist: (await runCli('allowlist', 'list', '--json')).stdout,
      audit: (await runCli('audit', 'list', '--json')).stdout,
    };
    const file = join(root, 'backup.tgz');
    const backup = await runCli('db', 'backup', file, '--json');
    expect(backup.code, backup.stderr).toBe(0);
    expect(JSON.parse(backup.stdout)).toEqual({ file, bytes: expect.any(Number) });
    // a file that exists is never replaced
    const again = await runCli('db', 'backup', file);
    expect(again.code).toBe(2);
    expect(oneLine(again)).toMatch(/exists/);
    // restoring over the data dir the server holds is refused
    const over = await runCli('db', 'restore', file);
    expect(over.code).toBe(2);
    expect(oneLine(over)).toMatch(/already holds a database/);

    const restoredDir = join(root, 'restored');
    process.env.ATTEST_DATA_DIR = restoredDir;
    try {
      const restore = await runCli('db', 'restore', file, '--json');
      expect(restore.code, restore.stderr).toBe(0);
      // the master key travels apart from the backup
      copyFileSync(join(dataDir(), 'master.key'), join(restoredDir, 'master.key'));
      expect((await runCli('keys', 'list', '--json')).stdout).toBe(before.keys);
      expect((await runCli('allowlist', 'list', '--json')).stdout).toBe(before.allowlist);
      expect((await runCli('audit', 'list', '--json')).stdout).toBe(before.audit);
      const restoredAllowlist = JSON.parse(before.allowlist) as {
        android: { testOnlyKeyPairs: string[] }[];
      };
      expect(restoredAllowlist.android[0]!.testOnlyKeyPairs).toHaveLength(1);
      expect(JSON.parse(before.keys)).toContainEqual(expect.objectContaining({ id: key.id }));
      const handle = await openDatabase({ dataDir: restoredDir, role: 'cli', create: false });
      try {
        expect(await createAppleKeyRepository(handle.db).find(appleKey.keyId)).toMatchObject({
          appId: appleKey.appId,
          counter: 7,
        });
      } finally {
        await handle.close();
      }
      // and a second restore into it is refused
      const twice = await runCli('db', 'restore', file);
      expect(twice.code).toBe(2);
    } finally {
      process.env.ATTEST_DATA_DIR = dataDir();
    }
  }, 180_000);

  it('a file that is not a backup is refused with one line, exit 2, and leaves no database', async () => {
    const junk = join(root, 'junk.tgz');
    const { writeFileSync, existsSync } = await import('node:fs');
    writeFileSync(junk, 'not a backup');
    process.env.ATTEST_DATA_DIR = join(root, 'junk-restore');
    try {
      const run = await runCli('db', 'restore', junk);
      expect(run.code).toBe(2);
      expect(oneLine(run)).toMatch(/not a backup made by "attest db backup"/);
      expect(existsSync(join(root, 'junk-restore', 'pgdata'))).toBe(false);
    } finally {
      process.env.ATTEST_DATA_DIR = dataDir();
    }
  });
});
