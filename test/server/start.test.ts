import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, type Config } from '../../src/config.js';
import { DatabaseBusyError } from '../../src/db/client.js';
import { startServer, type RunningServer } from '../../src/server/start.js';
import { postgresBackend, type TestDatabase } from '../support/databases.js';
import { rawConnect } from '../support/rawHttp.js';
import { TEST_MASTER_KEY_ENV } from '../support/secrets.js';
import { captureLogger, issueKey } from '../support/service.js';
import { b64, token } from '../support/tokens.js';

const REJECTED = '{"isValid":false,"statusCode":0}';

function configFor(over: Partial<Config>): Config {
  return {
    ...loadConfig({}, {}), // defaults for settings these tests do not touch
    databaseUrl: undefined,
    dataDir: '',
    port: 0,
    host: '127.0.0.1',
    sessionTtlSeconds: 300,
    sessionRetentionSeconds: 3600,
    metricsPort: undefined,
    metricsHost: '127.0.0.1',
    appleRootCaPath: undefined,
    apiKeyPrefix: 'attest',
    logLevel: 'info',
    logFile: undefined,
    masterKey: undefined,
    masterKeyFile: undefined,
    testKeys: true,
    ...over,
  };
}

interface Target {
  name: string;
  start(): Promise<{
    server: RunningServer;
    logs: ReturnType<typeof captureLogger>['capture'];
    cleanup(): Promise<void>;
  }>;
}

const targets: Target[] = [
  {
    name: 'embedded',
    async start() {
      const dir = mkdtempSync(join(tmpdir(), 'attest-start-'));
      const { logger, capture } = captureLogger();
      const server = await startServer(configFor({ dataDir: dir }), logger, { migrate: true });
      return {
        server,
        logs: capture,
        cleanup: async () => rmSync(dir, { recursive: true, force: true }),
      };
    },
  },
];
const pg = postgresBackend();
if (pg) {
  targets.push({
    name: 'postgres',
    async start() {
      const db: TestDatabase = await pg.open();
      const { logger, capture } = captureLogger();
      const server = await startServer(
        configFor({ databaseUrl: db.url, masterKey: TEST_MASTER_KEY_ENV }),
        logger,
        { migrate: true },
      );
      return { server, logs: capture, cleanup: () => db.close() };
    },
  });
}

describe.each(targets)('startServer on $name', (target) => {
  let running: Awaited<ReturnType<Target['start']>>;
  let key: string;

  beforeAll(async () => {
    running = await target.start();
    key = (await issueKey(running.server.database)).key;
  });
  afterAll(async () => {
    await running?.server.close();
    await running?.cleanup();
  });

  it('listens on the port asked (0: any) and logs it', () => {
    expect(running.server.port).toBeGreaterThan(0);
    expect(running.server.url).toBe(`http://127.0.0.1:${running.server.port}`);
    expect(running.logs.lines.some((l) => l.msg === 'listening')).toBe(true);
  });

  it('over a real socket every answer carries the request id once: a valid given one echoed, else a new UUID', async () => {
    const { url } = running.server;
    const cases: [string, RequestInit, number][] = [
      ['/api/v1/attestation/init', { method: 'POST', headers: { 'X-Api-Key': key } }, 200],
      ['/api/v1/attestation/init', { method: 'POST' }, 401],
      ['/api/v1/nothing-here', { method: 'POST', headers: { 'X-Api-Key': key } }, 404],
      [
        '/api/v1/attestation/verify',
        { method: 'POST', headers: { 'X-Api-Key': key, 'Content-Type': 'text/plain' }, body: '{}' },
        400,
      ],
      ['/healthz', {}, 200],
    ];
    for (const [path, init, status] of cases) {
      const given = `req-${status}-${path.length}`;
      const echoed = await fetch(`${url}${path}`, {
        ...init,
        headers: { ...(init.headers as Record<string, string>), 'X-Request-Id': given },
      });
      expect(echoed.status, path).toBe(status);
      // a second copy would read as "id, id"
      expect(echoed.headers.get('x-request-id'), path).toBe(given);
      expect(running.logs.last()).toMatchObject({ requestId: given, status });
      const fresh = await fetch(`${url}${path}`, {
        ...init,
        headers: { ...(init.headers as Record<string, string>), 'X-Request-Id': 'has spaces' },
      });
      expect(fresh.headers.get('x-request-id'), path).toMatch(
        /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
      );
    }
  });

  it('init, then verify over a real socket; the retry is rejected', async () => {
    const { url } = running.server;
    const initRes = await fetch(`${url}/api/v1/attestation/init`, {
      method: 'POST',
      headers: { 'X-Api-Key': key, Accept: 'application/json' },
    });
    expect(initRes.status).toBe(200);
    expect(initRes.headers.get('x-request-id')).toBeTruthy();
    const session = (await initRes.json()) as { sessionReference: string; serverNonce: string };
    const body = JSON.stringify({
      attestationToken: b64(token(new Uint8Array(Buffer.from(session.serverNonce, 'base64')))),
      sessionReference: session.sessionReference,
    });
    const post = () =>
      fetch(`${url}/api/v1/attestation/verify`, {
        method: 'POST',
        headers: { 'X-Api-Key': key, 'Content-Type': 'application/json' },
        body,
      });
    const first = await post();
    expect(first.status).toBe(200);
    // the fake evidence cannot pass the real App Attest verifier: a rejection, but past the session
    expect(await first.text()).toBe(REJECTED);
    expect(running.logs.last()).toMatchObject({
      approach: 'session',
      isValid: false,
      service: 'apple',
    });
    expect(String(running.logs.last().reason)).not.toMatch(/^session_/);
    const retry = await post();
    expect(await retry.text()).toBe(REJECTED);
    expect(running.logs.last()).toMatchObject({ reason: 'session_consumed' });
    expect((await fetch(`${url}/readyz`)).status).toBe(200);
    expect((await fetch(`${url}/api/v1/attestation/init`, { method: 'POST' })).status).toBe(401);
  });

  it('a chunked body over 64 KiB is cut off with 413', async () => {
    const conn = await rawConnect(running.server.url);
    await conn.write(
      `POST /api/v1/attestation/verify HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${key}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`,
    );
    const chunk = 'x'.repeat(8192);
    const writes: Promise<boolean>[] = [];
    for (let i = 0; i < 9; i++)
      writes.push(conn.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`));
    expect(await conn.status()).toBe(413);
    expect(conn.received()).toContain('268505089');
    expect(conn.received().toLowerCase()).toContain('x-request-id:');
    conn.socket.destroy();
    await Promise.allSettled(writes);
  });

  it('a Content-Length over 64 KiB is answered 413 before any body byte is sent', async () => {
    const conn = await rawConnect(running.server.url);
    const started = performance.now();
    await conn.write(
      `POST /api/v1/attestation/verify HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${key}\r\nContent-Type: application/json\r\nContent-Length: 10000000\r\n\r\n`,
    );
    expect(await conn.status()).toBe(413);
    expect(performance.now() - started).toBeLessThan(2000);
    conn.socket.destroy();
  });

  it('a chunked body within the limit is read', async () => {
    const conn = await rawConnect(running.server.url);
    const body = JSON.stringify({
      attestationToken: 'AQID',
      expectedNonce: b64(new Uint8Array(16)),
    });
    await conn.write(
      `POST /api/v1/attestation/verify HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${key}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n`,
    );
    await conn.write(`${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`);
    expect(await conn.status()).toBe(200);
    await conn.closed();
    expect(conn.received()).toContain(REJECTED);
  });
});

describe('startServer: slow clients and the data dir lock (embedded)', () => {
  let dir: string;
  let server: RunningServer;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'attest-slow-'));
    server = await startServer(configFor({ dataDir: dir }), captureLogger().logger, {
      migrate: true,
    });
  });
  afterAll(async () => {
    await server?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a client that never finishes its headers is cut off after the 5 s header timeout', async () => {
    const conn = await rawConnect(server.url);
    await conn.write('POST /api/v1/attestation/verify HTTP/1.1\r\nHost: x\r\nX-Slow: ');
    const tick = setInterval(() => void conn.write('a'), 500); // trickling bytes must not keep it alive
    const closedAfter = await Promise.race([
      conn.closed(),
      new Promise<number>((r) => setTimeout(() => r(Infinity), 9000)),
    ]);
    clearInterval(tick);
    conn.socket.destroy();
    expect(closedAfter).toBeGreaterThanOrEqual(4500);
    expect(closedAfter).toBeLessThan(8000);
  }, 15_000);

  it('a second server on the same data dir fails with DatabaseBusyError', async () => {
    await expect(
      startServer(configFor({ dataDir: dir }), captureLogger().logger, { migrate: true }),
    ).rejects.toBeInstanceOf(DatabaseBusyError);
    // and the first one is unharmed
    expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
  });

  it('after close the data dir can be opened again and keeps its data', async () => {
    const issued = await issueKey(server.database);
    await server.close();
    server = await startServer(configFor({ dataDir: dir }), captureLogger().logger, {
      migrate: true,
    });
    const res = await fetch(`${server.url}/api/v1/attestation/init`, {
      method: 'POST',
      headers: { 'X-Api-Key': issued.key },
    });
    expect(res.status).toBe(200);
  });
});
