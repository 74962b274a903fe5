/**
 * client.consumeResultToken against the running app (over a socket): the token a verify gave is
 * consumed once (alreadyConsumed false, then true), a tampered one is `{ valid: false }`, a
 * malformed one is an AttestHttpError 400, and an answer outside the contract an
 * AttestResponseError.
 */
import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AttestHttpError,
  AttestResponseError,
  STATUS_INVALID_REQUEST,
  createAttestClient,
  type ConsumeResult,
} from '../../src/client/index.js';
import { createResultKeyRepository } from '../../src/db/resultKeys.js';
import { createResultTokenSigner } from '../../src/server/resultTokenSigner.js';
import { backends, type TestDatabase } from '../support/databases.js';
import { TEST_SECRETS } from '../support/secrets.js';
import { createTestService, issueKey } from '../support/service.js';
import { token } from '../support/tokens.js';

const ISSUER = 'https://attest.example.com';

describe.each(backends())('client.consumeResultToken against the app on $name', (backend) => {
  let db: TestDatabase;
  let server: ServerType;
  let url: string;
  let rpKey: string;
  let ledgerKey: string;

  beforeAll(async () => {
    db = await backend.open();
    rpKey = (await issueKey(db, { name: 'rp', resultTokens: true })).key;
    ledgerKey = (await issueKey(db, { name: 'ledger' })).key;
    const signer = createResultTokenSigner({
      keys: createResultKeyRepository(db.db, TEST_SECRETS),
      issuer: ISSUER,
      ttlSeconds: 300,
      refreshMs: 5000,
    });
    server = serve({
      fetch: createTestService(db, { resultTokens: signer }).app.fetch,
      port: 0,
      hostname: '127.0.0.1',
    });
    if (!server.listening) await once(server, 'listening');
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    (server as Server).closeAllConnections?.();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await db?.close();
  });

  const client = (apiKey: string) => createAttestClient({ baseUrl: url, apiKey });

  it('the RP verifies, the ledger consumes: accepted once, then alreadyConsumed', async () => {
    const nonce = Buffer.alloc(32, 5);
    const verified = await client(rpKey).verify({
      attestationToken: token(nonce),
      expectedNonce: nonce,
    });
    if (!verified.isValid || verified.service !== 'apple' || !verified.resultToken)
      throw new Error('expected an apple result token');
    const ledger = client(ledgerKey);
    const first: ConsumeResult = await ledger.consumeResultToken(verified.resultToken);
    expect(first).toMatchObject({
      valid: true,
      alreadyConsumed: false,
      claims: { iss: ISSUER, service: 'apple', approach: 'sessionless' },
    });
    if (!first.valid) throw new Error('expected valid');
    expect(first.claims.details).toEqual(verified.appleTokenDetails);
    expect(await ledger.consumeResultToken(verified.resultToken)).toEqual({
      ...first,
      alreadyConsumed: true,
    });
    const [h, p, s] = verified.resultToken.split('.');
    const tampered = `${h}.${p}.${s!.startsWith('A') ? 'B' : 'A'}${s!.slice(1)}`;
    expect(await ledger.consumeResultToken(tampered)).toEqual({ valid: false });
  });

  it('a malformed token is an AttestHttpError 400 (invalid_request); an empty one a TypeError before any request', async () => {
    const err = await client(ledgerKey)
      .consumeResultToken('a'.repeat(9000))
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AttestHttpError);
    expect(err).toMatchObject({
      operation: 'consume',
      status: 400,
      kind: 'invalid_request',
      statusCode: STATUS_INVALID_REQUEST,
    });
    await expect(client(ledgerKey).consumeResultToken('')).rejects.toThrow(TypeError);
  });
});

describe('client.consumeResultToken and answers outside the contract', () => {
  const answering = (body: string) =>
    createAttestClient({
      baseUrl: 'http://attest.test',
      apiKey: 'attest_x',
      fetch: async () => new Response(body, { status: 200 }),
    });

  it('valid true without alreadyConsumed or claims, or a non-boolean valid, is an AttestResponseError', async () => {
    for (const body of [
      '{"valid":true}',
      '{"valid":true,"alreadyConsumed":false}',
      '{"valid":"yes"}',
      '{"valid":true,"alreadyConsumed":false,"claims":{"iss":"x"}}',
      'not json',
    ]) {
      const err = await answering(body)
        .consumeResultToken('a.b.c')
        .catch((e: unknown) => e);
      expect({ body, err }).toMatchObject({ body, err: expect.any(AttestResponseError) });
    }
    expect(await answering('{"valid":false}').consumeResultToken('a.b.c')).toEqual({
      valid: false,
    });
  });
});
