/**
 * The Google client against the local fake Google: the JWT-bearer grant as Google checks it,
 * access-token caching, refresh and single flight, 401 handling, and every fault (timeout, 429,
 * 5xx, unreachable, refused credentials) against rejections (400 INVALID_ARGUMENT).
 */
import { createServer } from 'node:net';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  createPlayIntegrityClient,
  GoogleBusyError,
  GoogleFault,
  PLAY_INTEGRITY_SCOPE,
  TOKEN_REFRESH_MARGIN_MS,
  type GoogleEvent,
  type PlayIntegrityClientOptions,
} from '../../src/upstream/playIntegrityClient.js';
import {
  createTestServiceAccount,
  startFakeGoogle,
  type FakeGoogle,
  type TestServiceAccount,
} from '../support/fakeGoogle.js';
import { TEST_PACKAGE } from '../support/googleFactory.js';

let sa: TestServiceAccount;
let stranger: TestServiceAccount;
let fake: FakeGoogle;
let clock: number;
let events: GoogleEvent[];

beforeAll(() => {
  sa = createTestServiceAccount();
  // same email, another key: Google would refuse its assertions
  stranger = createTestServiceAccount(sa.account.clientEmail);
});

beforeEach(async () => {
  clock = Date.parse('2026-11-22T12:00:00Z');
  events = [];
  fake = await startFakeGoogle({ accounts: [sa], now: () => clock });
});
afterEach(async () => {
  await fake.close();
});

function client(over: Partial<PlayIntegrityClientOptions> = {}) {
  return createPlayIntegrityClient({
    oauthUrl: fake.oauthUrl,
    playIntegrityUrl: fake.playIntegrityUrl,
    timeoutMs: 2000,
    maxInFlight: 8,
    now: () => clock,
    onEvent: (e) => events.push(e),
    ...over,
  });
}

const payload = { requestDetails: { requestPackageName: TEST_PACKAGE } };
const decodeWith = (c: ReturnType<typeof client>, token: string, account = sa.account) =>
  c.decode({ packageName: TEST_PACKAGE, integrityToken: token, serviceAccount: account });

async function faultOf(work: Promise<unknown>): Promise<string> {
  const err = await work.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(GoogleFault);
  return (err as GoogleFault).code;
}

describe('decodeIntegrityToken', () => {
  it('decodes with a JWT-bearer access token, as Google checks it', async () => {
    const c = client();
    expect(await decodeWith(c, fake.issue(TEST_PACKAGE, payload))).toEqual({ ok: true, payload });
    const { header, claims } = fake.lastAssertion!;
    expect(header).toMatchObject({ alg: 'RS256', typ: 'JWT', kid: sa.account.privateKeyId });
    expect(claims).toMatchObject({
      iss: sa.account.clientEmail,
      aud: fake.oauthUrl,
      scope: PLAY_INTEGRITY_SCOPE,
      iat: clock / 1000,
      exp: clock / 1000 + 3600,
    });
    expect(events).toEqual([
      { endpoint: 'token', outcome: 'ok' },
      { endpoint: 'decode', outcome: 'ok' },
    ]);
  });

  it('keeps the access token until shortly before it expires, then fetches a new one', async () => {
    const c = client();
    await decodeWith(c, fake.issue(TEST_PACKAGE, payload));
    clock += fake.expiresIn * 1000 - TOKEN_REFRESH_MARGIN_MS - 1;
    await decodeWith(c, fake.issue(TEST_PACKAGE, payload));
    expect(fake.counts).toEqual({ token: 1, decode: 2 });
    clock += 2;
    await decodeWith(c, fake.issue(TEST_PACKAGE, payload));
    expect(fake.counts).toEqual({ token: 2, decode: 3 });
  });

  it('shares one token request among concurrent first uses', async () => {
    const c = client();
    const results = await Promise.all(
      Array.from({ length: 6 }, () => decodeWith(c, fake.issue(TEST_PACKAGE, payload))),
    );
    expect(results.every((r) => r.ok)).toBe(true);
    expect(fake.counts).toEqual({ token: 1, decode: 6 });
  });

  it('on 401 fetches a new token once and retries', async () => {
    const c = client();
    await decodeWith(c, fake.issue(TEST_PACKAGE, payload));
    fake.revokeTokens();
    expect(await decodeWith(c, fake.issue(TEST_PACKAGE, payload))).toMatchObject({ ok: true });
    expect(fake.counts).toEqual({ token: 2, decode: 3 });
  });

  it('a second 401 is a fault, not a verdict', async () => {
    const c = client();
    fake.faultNext('decode', { status: 401 });
    fake.faultNext('decode', { status: 401 });
    expect(await faultOf(decodeWith(c, fake.issue(TEST_PACKAGE, payload)))).toBe('unauthorized');
    expect(fake.counts).toEqual({ token: 2, decode: 2 });
  });

  it('400 INVALID_ARGUMENT is a rejection of the token', async () => {
    const result = await decodeWith(client(), 'not-a-token-google-issued');
    expect(result).toEqual({ ok: false, problem: expect.stringContaining('INVALID_ARGUMENT') });
    expect(events.at(-1)).toEqual({ endpoint: 'decode', outcome: 'rejected' });
  });

  it.each([
    [429, 'rate_limited'],
    [500, 'server_error'],
    [503, 'server_error'],
    [403, 'forbidden'],
  ])('HTTP %i from decodeIntegrityToken is a fault (%s)', async (status, code) => {
    fake.faultNext('decode', { status });
    expect(await faultOf(decodeWith(client(), fake.issue(TEST_PACKAGE, payload)))).toBe(code);
    expect(events.at(-1)).toEqual({ endpoint: 'decode', outcome: code });
  });

  it.each([
    [429, 'rate_limited'],
    [503, 'server_error'],
  ])('HTTP %i from the token endpoint is a fault (%s)', async (status, code) => {
    fake.faultNext('token', { status });
    expect(await faultOf(decodeWith(client(), fake.issue(TEST_PACKAGE, payload)))).toBe(code);
    expect(fake.counts.decode).toBe(0);
  });

  it('an assertion signed with another key is refused by Google: a fault', async () => {
    expect(
      await faultOf(decodeWith(client(), fake.issue(TEST_PACKAGE, payload), stranger.account)),
    ).toBe('oauth_refused');
    expect(fake.counts).toEqual({ token: 1, decode: 0 });
  });

  it('no answer within the bound is a timeout fault, token request or decode', async () => {
    fake.faultNext('decode', { hang: true });
    const c = client({ timeoutMs: 300 });
    expect(await faultOf(decodeWith(c, fake.issue(TEST_PACKAGE, payload)))).toBe('timeout');
    fake.faultNext('token', { hang: true });
    expect(
      await faultOf(decodeWith(client({ timeoutMs: 300 }), fake.issue(TEST_PACKAGE, payload))),
    ).toBe('timeout');
  });

  it('a slow answer inside the bound is fine', async () => {
    fake.faultNext('decode', { delayMs: 100 });
    expect(await decodeWith(client(), fake.issue(TEST_PACKAGE, payload))).toMatchObject({
      ok: true,
    });
  });

  it('an unreachable Google is a fault', async () => {
    const port = await closedPort();
    const c = client({
      oauthUrl: `http://127.0.0.1:${port}/token`,
      playIntegrityUrl: `http://127.0.0.1:${port}`,
    });
    expect(await faultOf(decodeWith(c, 'x'))).toBe('unreachable');
  });

  it('refuses decodes beyond the concurrency limit, and takes them again once one finishes', async () => {
    const c = client({ maxInFlight: 2 });
    const gate = fake.gate();
    const held = [
      decodeWith(c, fake.issue(TEST_PACKAGE, payload)),
      decodeWith(c, fake.issue(TEST_PACKAGE, payload)),
    ];
    await gate.arrived(2);
    expect(c.inFlight()).toBe(2);
    await expect(decodeWith(c, fake.issue(TEST_PACKAGE, payload))).rejects.toBeInstanceOf(
      GoogleBusyError,
    );
    gate.release();
    expect((await Promise.all(held)).every((r) => r.ok)).toBe(true);
    expect(c.inFlight()).toBe(0);
    expect(await decodeWith(c, fake.issue(TEST_PACKAGE, payload))).toMatchObject({ ok: true });
    expect(events.filter((e) => e.outcome === 'busy')).toHaveLength(1);
  });
});

/** A port nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
