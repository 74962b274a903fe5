/**
 * The typed client against the real app over a socket (real sessions, keys and authenticator;
 * the fake apple verifier of test/support/tokens.ts), plus a tiny fault server for what the app
 * does not do on demand: timeouts, 5xx, Retry-After, bodies that break the contract.
 */
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AttestHttpError,
  AttestNetworkError,
  AttestResponseError,
  AttestTimeoutError,
  STATUS_INTERNAL_ERROR,
  STATUS_INVALID_REQUEST,
  createAttestClient,
  type AttestClientOptions,
} from '../../src/client/index.js';
import { backends, type TestDatabase } from '../support/databases.js';
import { createTestService, issueKey } from '../support/service.js';
import { appleEvidence, b64, token } from '../support/tokens.js';

async function listen(server: Server | ServerType): Promise<string> {
  if (!server.listening) await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function close(server: Server | ServerType | undefined) {
  if (!server) return;
  (server as Server).closeAllConnections?.();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

/** What a caught promise rejected with (fails the test when it resolved). */
async function caught(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error('expected a rejection');
}

describe.each(backends())('client against the app on $name', (backend) => {
  let db: TestDatabase;
  let server: ServerType;
  let url: string;
  let key: string;
  let service: ReturnType<typeof createTestService>;

  beforeAll(async () => {
    db = await backend.open();
    key = (await issueKey(db)).key;
    service = createTestService(db);
    server = serve({ fetch: service.app.fetch, port: 0, hostname: '127.0.0.1' });
    url = await listen(server);
  });
  afterAll(async () => {
    await close(server);
    await db?.close();
  });

  const client = (options: Partial<AttestClientOptions> = {}) =>
    createAttestClient({ baseUrl: url, apiKey: key, timeoutMs: 10_000, ...options });

  it('init then verify (session approach): valid with the apple details, and the request id reaches the log', async () => {
    const attest = client();
    const session = await attest.init();
    expect(session.statusCode).toBe(0);
    expect(Buffer.from(session.serverNonce, 'base64')).toHaveLength(32);
    const result = await attest.verify(
      {
        attestationToken: token(Buffer.from(session.serverNonce, 'base64')),
        sessionReference: session.sessionReference,
      },
      { requestId: 'rp-login-1' },
    );
    expect(result.isValid).toBe(true);
    if (!result.isValid || result.service !== 'apple') throw new Error('expected apple');
    expect(result.appleTokenDetails).toMatchObject({
      appId: 'ABCDE12345.com.example.bank',
      environment: 'Production',
      assertionCounter: 1,
    });
    expect(
      service.logs.requests().some((l) => l.requestId === 'rp-login-1' && l.isValid === true),
    ).toBe(true);
  });

  it('a device nonce is appended to the server nonce (bytes or base64 accepted)', async () => {
    const attest = client();
    const session = await attest.init();
    const deviceNonce = new Uint8Array([1, 2, 3, 4]);
    const final = Buffer.concat([Buffer.from(session.serverNonce, 'base64'), deviceNonce]);
    const result = await attest.verify({
      attestationToken: b64(token(final)),
      sessionReference: session.sessionReference,
      deviceNonce,
    });
    expect(result.isValid).toBe(true);
  });

  it('a rejected token is isValid false with no details; the consumed session stays rejected', async () => {
    const attest = client();
    const session = await attest.init();
    const nonce = Buffer.from(session.serverNonce, 'base64');
    const bad = await attest.verify({
      attestationToken: token(nonce, { evidence: appleEvidence(undefined, Buffer.from('forged')) }),
      sessionReference: session.sessionReference,
    });
    expect(bad).toEqual({ isValid: false, statusCode: 0 });
    const again = await attest.verify({
      attestationToken: token(nonce),
      sessionReference: session.sessionReference,
    });
    expect(again).toEqual({ isValid: false, statusCode: 0 });
  });

  it('sessionless: expectedNonce', async () => {
    const nonce = new Uint8Array(32).fill(9);
    expect(
      (await client().verify({ attestationToken: token(nonce), expectedNonce: nonce })).isValid,
    ).toBe(true);
    expect(
      (
        await client().verify({
          attestationToken: token(nonce),
          expectedNonce: new Uint8Array(32).fill(8),
        })
      ).isValid,
    ).toBe(false);
  });

  it('401 without a usable key and 403 with a wrong one, typed, never retried', async () => {
    const calls: string[] = [];
    const counting: typeof fetch = (input, init) => (calls.push(String(input)), fetch(input, init));
    const wrong = await caught(
      client({
        apiKey: 'attest_0000000000000000_not-a-real-secret-at-all-000000000',
        fetch: counting,
      }).init(),
    );
    expect(wrong).toBeInstanceOf(AttestHttpError);
    expect(wrong).toMatchObject({
      status: 403,
      kind: 'forbidden',
      statusCode: undefined,
      operation: 'init',
    });
    expect(calls).toHaveLength(1);
    // a blank header value is "missing" for the service
    const blank = await caught(
      client({ apiKey: ' ' }).verify({
        attestationToken: 'AAAA',
        expectedNonce: b64(new Uint8Array(16)),
      }),
    );
    expect(blank).toMatchObject({ status: 401, kind: 'unauthorized' });
  });

  it('400 from the service carries the contract statusCode and message, and the service request id', async () => {
    const err = await caught(
      client().verify({
        attestationToken: '!!not base64!!',
        expectedNonce: b64(new Uint8Array(16)),
      }),
    );
    expect(err).toBeInstanceOf(AttestHttpError);
    expect(err).toMatchObject({
      status: 400,
      kind: 'invalid_request',
      statusCode: STATUS_INVALID_REQUEST,
    });
    expect((err as AttestHttpError).errorMessage).toEqual(expect.any(String));
    expect((err as AttestHttpError).requestId).toMatch(/.+/);
  });

  it('413 for a body over 64 KiB', async () => {
    const err = await caught(
      client().verify({
        attestationToken: 'A'.repeat(70_000),
        expectedNonce: b64(new Uint8Array(16)),
      }),
    );
    expect(err).toMatchObject({
      status: 413,
      kind: 'too_large',
      statusCode: STATUS_INVALID_REQUEST,
    });
  });

  it('a base URL with a path prefix keeps it', async () => {
    const err = await caught(client({ baseUrl: `${url}/mounted/` }).init());
    // the app has no /mounted prefix: 401/403 would mean the prefix was dropped and /api/ was reached
    expect(err).toMatchObject({ status: 404 });
  });
});

describe('client argument checks', () => {
  it('refuses bad options at construction', () => {
    expect(() => createAttestClient({ baseUrl: 'not a url', apiKey: 'k' })).toThrow(TypeError);
    expect(() => createAttestClient({ baseUrl: 'ftp://x', apiKey: 'k' })).toThrow(/http/);
    expect(() => createAttestClient({ baseUrl: 'http://x', apiKey: '' })).toThrow(/apiKey/);
    expect(() => createAttestClient({ baseUrl: 'http://x', apiKey: 'k', timeoutMs: 0 })).toThrow(
      /timeoutMs/,
    );
    expect(() => createAttestClient({ baseUrl: 'http://x', apiKey: 'k', initRetries: -1 })).toThrow(
      /initRetries/,
    );
  });

  it('verify needs exactly one of sessionReference and expectedNonce, and no deviceNonce with expectedNonce (no request sent)', async () => {
    let sent = 0;
    const attest = createAttestClient({
      baseUrl: 'http://127.0.0.1:9',
      apiKey: 'k',
      fetch: async () => (sent++, new Response()),
    });
    await expect(attest.verify({ attestationToken: 'AAAA' } as never)).rejects.toThrow(
      /exactly one/,
    );
    await expect(
      attest.verify({
        attestationToken: 'AAAA',
        sessionReference: 's',
        expectedNonce: 'AAAA',
      } as never),
    ).rejects.toThrow(/exactly one/);
    await expect(
      attest.verify({
        attestationToken: 'AAAA',
        expectedNonce: 'AAAA',
        deviceNonce: 'AA',
      } as never),
    ).rejects.toThrow(/deviceNonce/);
    expect(sent).toBe(0);
  });
});

/** A server whose answers a test scripts one request at a time; `hits` counts requests per path. */
function faultServer() {
  const handlers: ((req: IncomingMessage, res: ServerResponse) => void)[] = [];
  const hits: string[] = [];
  const server = createServer((req, res) => {
    hits.push(req.url ?? '');
    req.resume();
    const next = handlers.shift();
    if (next) next(req, res);
    else res.writeHead(599).end();
  });
  server.listen(0, '127.0.0.1');
  return { server, hits, script: (...h: typeof handlers) => handlers.push(...h) };
}

const json =
  (status: number, body: unknown, headers: Record<string, string> = {}) =>
  (_req: IncomingMessage, res: ServerResponse) =>
    res
      .writeHead(status, { 'Content-Type': 'application/json', ...headers })
      .end(JSON.stringify(body));
const SESSION = {
  sessionReference: 'ses_x',
  serverNonce: b64(new Uint8Array(32)),
  expiresAtUtc: '2026-01-01T00:00:00.000Z',
  statusCode: 0,
};
const INTERNAL = { statusCode: STATUS_INTERNAL_ERROR, errorMessage: 'Internal error' };

describe('client against a fault server', () => {
  let fault: ReturnType<typeof faultServer>;
  let url: string;
  /** requests left hanging (never answered): ended in afterAll */
  const hanging: ServerResponse[] = [];
  beforeAll(async () => {
    fault = faultServer();
    url = await listen(fault.server);
  });
  afterAll(async () => {
    for (const res of hanging) res.destroy();
    await close(fault.server);
  });

  /** a client whose waits are recorded, not slept */
  const client = (options: Partial<AttestClientOptions> = {}) => {
    const waits: number[] = [];
    const attest = createAttestClient({
      baseUrl: url,
      apiKey: 'attest_k',
      timeoutMs: 5_000,
      sleep: async (ms) => void waits.push(ms),
      now: () => new Date('2026-01-01T00:00:00Z'),
      ...options,
    });
    return { attest, waits };
  };
  const hang = (_req: IncomingMessage, res: ServerResponse) => void hanging.push(res);

  it('init: 500 then 503 with Retry-After, then a session; backoff doubles, Retry-After wins', async () => {
    fault.hits.length = 0;
    fault.script(
      json(500, INTERNAL),
      json(503, INTERNAL, { 'Retry-After': '3' }),
      json(200, SESSION),
    );
    const { attest, waits } = client({ retryDelayMs: 100 });
    expect(await attest.init()).toEqual(SESSION);
    expect(waits).toEqual([100, 3000]);
    expect(fault.hits).toEqual([
      '/api/v1/attestation/init',
      '/api/v1/attestation/init',
      '/api/v1/attestation/init',
    ]);
  });

  it('init: Retry-After as an HTTP date, capped by maxRetryDelayMs', async () => {
    fault.script(
      json(503, INTERNAL, { 'Retry-After': 'Thu, 01 Jan 2026 00:00:02 GMT' }),
      json(503, INTERNAL, { 'Retry-After': '3600' }),
      json(200, SESSION),
    );
    const { attest, waits } = client({ maxRetryDelayMs: 4_000 });
    await attest.init();
    expect(waits).toEqual([2000, 4000]);
  });

  it('init: gives up after initRetries, throwing the last failure', async () => {
    fault.hits.length = 0;
    fault.script(json(500, INTERNAL), json(500, INTERNAL), json(503, INTERNAL));
    const err = await caught(client({ initRetries: 2 }).attest.init());
    expect(err).toBeInstanceOf(AttestHttpError);
    expect(err).toMatchObject({
      status: 503,
      kind: 'unavailable',
      statusCode: STATUS_INTERNAL_ERROR,
    });
    expect(fault.hits).toHaveLength(3);
  });

  it('init: a timeout is retried; timeouts every time end in AttestTimeoutError', async () => {
    fault.script(hang, json(200, SESSION));
    expect(await client({ timeoutMs: 200 }).attest.init()).toEqual(SESSION);
    fault.script(hang, hang);
    const err = await caught(client({ timeoutMs: 200, initRetries: 1 }).attest.init());
    expect(err).toBeInstanceOf(AttestTimeoutError);
    expect(err).toMatchObject({ operation: 'init', timeoutMs: 200 });
  });

  it('init: a 4xx is not retried', async () => {
    fault.hits.length = 0;
    fault.script((_req, res) => res.writeHead(403).end());
    expect(await caught(client().attest.init())).toMatchObject({ status: 403 });
    expect(fault.hits).toHaveLength(1);
  });

  it('verify: a 500, a 503 with Retry-After and a timeout are thrown at once, never retried', async () => {
    const body = { attestationToken: 'AAAA', sessionReference: 'ses_x' };
    for (const [answer, expected] of [
      [json(500, INTERNAL), AttestHttpError],
      [json(503, INTERNAL, { 'Retry-After': '1' }), AttestHttpError],
      [hang, AttestTimeoutError],
    ] as const) {
      fault.hits.length = 0;
      fault.script(answer);
      const { attest, waits } = client({ timeoutMs: 200 });
      expect(await caught(attest.verify(body))).toBeInstanceOf(expected);
      expect(fault.hits).toEqual(['/api/v1/attestation/verify']);
      expect(waits).toEqual([]);
    }
  });

  it('verify: a 200 that breaks the contract is never taken as valid', async () => {
    const body = { attestationToken: 'AAAA', expectedNonce: 'AAAAAAAAAAAAAAAAAAAAAA==' };
    const apple = {
      keyIdentifier: 'AA==',
      appId: 'T.b',
      environment: 'Production',
      assertionCounter: 1,
      platform: 'iOS',
    };
    for (const answer of [
      { isValid: true, statusCode: 0, appleTokenDetails: { ...apple, platform: undefined } },
      { isValid: 'true', statusCode: 0, appleTokenDetails: apple },
      { isValid: true, statusCode: 1, appleTokenDetails: apple },
      { isValid: true, statusCode: 0 },
      { isValid: true, statusCode: 0, appleTokenDetails: { ...apple, environment: 'Sandbox' } },
      {
        isValid: true,
        statusCode: 0,
        appleTokenDetails: apple,
        googleTokenDetails: { packageName: 'p', deviceIntegrityVerdicts: [], timestampMillis: 1 },
      },
      'not json',
    ]) {
      fault.script(
        answer === 'not json' ? (_req, res) => res.writeHead(200).end('{') : json(200, answer),
      );
      expect(await caught(client().attest.verify(body))).toBeInstanceOf(AttestResponseError);
    }
    // a rejection's stray details are dropped, not passed on
    fault.script(json(200, { isValid: false, statusCode: 0, appleTokenDetails: apple }));
    expect(await client().attest.verify(body)).toEqual({ isValid: false, statusCode: 0 });
    // a key with rejection details: the reason and the Play dialog are passed on as they came
    const rejection = {
      reason: 'gms_not_licensed',
      remediation: { dialog: 'GET_LICENSED', typeCode: 1 },
    };
    fault.script(json(200, { isValid: false, statusCode: 0, rejection }));
    expect(await client().attest.verify(body)).toEqual({
      isValid: false,
      statusCode: 0,
      rejection,
    });
    for (const bad of [{ reason: 3 }, { reason: 'x', remediation: { dialog: 'GET_LICENSED' } }]) {
      fault.script(json(200, { isValid: false, statusCode: 0, rejection: bad }));
      expect(await caught(client().attest.verify(body))).toBeInstanceOf(AttestResponseError);
    }
  });

  it('a closed port is an AttestNetworkError (init retries it, verify does not)', async () => {
    const closed = createServer();
    const closedUrl = await listen(closed.listen(0, '127.0.0.1'));
    await close(closed);
    const { attest, waits } = client({ baseUrl: closedUrl, initRetries: 2 });
    const err = await caught(attest.init());
    expect(err).toBeInstanceOf(AttestNetworkError);
    // it names the URL it tried
    const initUrl = new URL(
      'api/v1/attestation/init',
      closedUrl.endsWith('/') ? closedUrl : `${closedUrl}/`,
    ).href;
    expect(err).toMatchObject({ url: initUrl });
    expect((err as Error).message).toContain(initUrl);
    expect(waits).toHaveLength(2);
    const v = client({ baseUrl: closedUrl });
    expect(
      await caught(v.attest.verify({ attestationToken: 'AAAA', sessionReference: 's' })),
    ).toBeInstanceOf(AttestNetworkError);
    expect(v.waits).toEqual([]);
  });

  it("the caller's own abort ends init's retries with the caller's reason", async () => {
    const controller = new AbortController();
    fault.script(json(500, INTERNAL));
    const attest = createAttestClient({
      baseUrl: url,
      apiKey: 'attest_k',
      sleep: async () => {
        controller.abort(new Error('caller gave up'));
        throw controller.signal.reason;
      },
    });
    await expect(attest.init({ signal: controller.signal })).rejects.toThrow('caller gave up');
  });
});
