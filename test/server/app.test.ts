import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createApiKeyRepository } from '../../src/db/apiKeys.js';
import { STATUS_INTERNAL_ERROR, STATUS_INVALID_REQUEST } from '../../src/server/errorBody.js';
import { backends, type TestDatabase } from '../support/databases.js';
import { BASE, createTestService, init, issueKey, verify } from '../support/service.js';
import { appleEvidence, b64, token } from '../support/tokens.js';

const REJECTED = '{"isValid":false,"statusCode":0}';
const nonceBytes = (b64text: string) => new Uint8Array(Buffer.from(b64text, 'base64'));
const concat = (...parts: Uint8Array[]) => new Uint8Array(Buffer.concat(parts));

describe.each(backends())('HTTP API on $name', (backend) => {
  let db: TestDatabase;
  let keyA: { id: string; key: string };
  let keyB: { id: string; key: string };
  let service: ReturnType<typeof createTestService>;

  beforeAll(async () => {
    db = await backend.open();
    keyA = await issueKey(db, { name: 'A' });
    keyB = await issueKey(db, { name: 'B' });
    service = createTestService(db);
  });
  afterAll(async () => {
    await db?.close();
  });
  beforeEach(() => service.logs.clear());

  /** a fresh session of key A: its reference and server nonce bytes */
  const session = async (key = keyA.key) => {
    const { res, body } = await init(service.app, key);
    expect(res.status).toBe(200);
    return { reference: body.sessionReference, serverNonce: nonceBytes(body.serverNonce), body };
  };
  /** proves the session is still active: a good verify with it succeeds */
  const expectActive = async (s: { reference: string; serverNonce: Uint8Array }) => {
    const res = await verify(service.app, keyA.key, {
      attestationToken: b64(token(s.serverNonce)),
      sessionReference: s.reference,
    });
    expect(await res.json()).toMatchObject({ isValid: true });
  };

  describe('init', () => {
    it('answers a session: reference, 32-byte server nonce, expiry ttl from now, statusCode 0', async () => {
      const before = Date.now();
      const { body, serverNonce } = await session();
      expect(Object.keys(body).sort()).toEqual([
        'expiresAtUtc',
        'serverNonce',
        'sessionReference',
        'statusCode',
      ]);
      expect(body.statusCode).toBe(0);
      expect(serverNonce.length).toBe(32);
      expect(body.serverNonce).toBe(Buffer.from(serverNonce).toString('base64'));
      expect(body.expiresAtUtc).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      const expires = Date.parse(body.expiresAtUtc);
      expect(expires).toBeGreaterThan(before + 295_000);
      expect(expires).toBeLessThan(Date.now() + 305_000);
      const again = await session();
      expect(again.reference).not.toBe(body.sessionReference);
      expect(Buffer.from(again.serverNonce).equals(Buffer.from(serverNonce))).toBe(false);
    });

    it('ignores a body, even a malformed one with another content type', async () => {
      const res = await service.app.request(`${BASE}/api/v1/attestation/init`, {
        method: 'POST',
        headers: { 'X-Api-Key': keyA.key, 'Content-Type': 'text/plain' },
        body: '{{{ not json',
      });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { statusCode: number }).statusCode).toBe(0);
    });
  });

  describe('verify: malformed requests answer 400 268505089 and leave the named session active', () => {
    const tok = () => b64(token(new Uint8Array(32)));
    const cases: [string, (ref: string) => unknown][] = [
      [
        'both sessionReference and expectedNonce',
        (ref) => ({
          attestationToken: tok(),
          sessionReference: ref,
          expectedNonce: b64(new Uint8Array(32)),
        }),
      ],
      [
        'deviceNonce together with expectedNonce (and a session)',
        (ref) => ({
          attestationToken: tok(),
          sessionReference: ref,
          expectedNonce: b64(new Uint8Array(32)),
          deviceNonce: 'AQID',
        }),
      ],
      ['missing attestationToken', (ref) => ({ sessionReference: ref })],
      ['null attestationToken', (ref) => ({ attestationToken: null, sessionReference: ref })],
      ['empty attestationToken', (ref) => ({ attestationToken: '', sessionReference: ref })],
      [
        'attestationToken with a character outside base64',
        (ref) => ({ attestationToken: `${tok()}!`, sessionReference: ref }),
      ],
      [
        'attestationToken with whitespace',
        (ref) => ({ attestationToken: ` ${tok()}`, sessionReference: ref }),
      ],
      [
        'attestationToken with bad padding',
        (ref) => ({ attestationToken: 'AQ=', sessionReference: ref }),
      ],
      [
        'attestationToken in mixed alphabets',
        (ref) => ({ attestationToken: 'ab+_', sessionReference: ref }),
      ],
      [
        'attestationToken with non-zero trailing bits',
        (ref) => ({ attestationToken: 'AR', sessionReference: ref }),
      ],
      ['attestationToken is a number', (ref) => ({ attestationToken: 12, sessionReference: ref })],
      [
        'attestationToken is an array of bytes',
        (ref) => ({ attestationToken: [1, 2, 3], sessionReference: ref }),
      ],
      ['attestationToken is true', (ref) => ({ attestationToken: true, sessionReference: ref })],
      ['sessionReference is a number', () => ({ attestationToken: tok(), sessionReference: 5 })],
      [
        'sessionReference is an object',
        (ref) => ({ attestationToken: tok(), sessionReference: { ref } }),
      ],
      ['empty sessionReference', () => ({ attestationToken: tok(), sessionReference: '' })],
      [
        'sessionReference over 256 characters',
        (ref) => ({ attestationToken: tok(), sessionReference: ref.padEnd(257, 'x') }),
      ],
      [
        'deviceNonce not base64',
        (ref) => ({ attestationToken: tok(), sessionReference: ref, deviceNonce: 'no pe' }),
      ],
      [
        'deviceNonce with bad padding',
        (ref) => ({ attestationToken: tok(), sessionReference: ref, deviceNonce: 'AQID=' }),
      ],
      [
        'deviceNonce empty (0 bytes)',
        (ref) => ({ attestationToken: tok(), sessionReference: ref, deviceNonce: '' }),
      ],
      [
        'deviceNonce of 129 bytes',
        (ref) => ({
          attestationToken: tok(),
          sessionReference: ref,
          deviceNonce: b64(new Uint8Array(129)),
        }),
      ],
      [
        'deviceNonce is a number',
        (ref) => ({ attestationToken: tok(), sessionReference: ref, deviceNonce: 7 }),
      ],
      [
        'deviceNonce is an array',
        (ref) => ({ attestationToken: tok(), sessionReference: ref, deviceNonce: ['AQID'] }),
      ],
      ['body is a JSON array', (ref) => [{ attestationToken: tok(), sessionReference: ref }]],
      [
        'body is a JSON string',
        (ref) => JSON.stringify(JSON.stringify({ attestationToken: tok(), sessionReference: ref })),
      ],
      ['body is JSON null', () => 'null'],
      ['body is a JSON number', () => '42'],
      ['body is not JSON', (ref) => `{"attestationToken":"${tok()}","sessionReference":"${ref}"`],
      ['body is empty', () => ''],
    ];
    it.each(cases)('%s', async (_why, make) => {
      const s = await session();
      const res = await verify(service.app, keyA.key, make(s.reference) as object);
      expect(res.status).toBe(400);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      const body = (await res.json()) as { statusCode: number; errorMessage: string };
      expect(body.statusCode).toBe(STATUS_INVALID_REQUEST);
      expect(typeof body.errorMessage).toBe('string');
      expect(body.errorMessage.length).toBeGreaterThan(0);
      expect(Object.keys(body).sort()).toEqual(['errorMessage', 'statusCode']);
      expect(service.logs.last()).toMatchObject({
        status: 400,
        route: '/api/v1/attestation/verify',
        apiKeyId: keyA.id,
      });
      await expectActive(s);
    });

    it.each([
      ['neither sessionReference nor expectedNonce', { attestationToken: 'AQID' }],
      [
        'expectedNonce of 15 bytes',
        { attestationToken: 'AQID', expectedNonce: b64(new Uint8Array(15)) },
      ],
      [
        'expectedNonce of 513 bytes',
        { attestationToken: 'AQID', expectedNonce: b64(new Uint8Array(513)) },
      ],
      ['expectedNonce not base64', { attestationToken: 'AQID', expectedNonce: '%%%%' }],
      ['expectedNonce empty', { attestationToken: 'AQID', expectedNonce: '' }],
      ['expectedNonce is a number', { attestationToken: 'AQID', expectedNonce: 1 }],
      [
        'deviceNonce with expectedNonce',
        { attestationToken: 'AQID', expectedNonce: b64(new Uint8Array(16)), deviceNonce: 'AQID' },
      ],
      [
        'only null fields',
        { attestationToken: 'AQID', sessionReference: null, expectedNonce: null },
      ],
    ])('sessionless: %s', async (_why, body) => {
      const res = await verify(service.app, keyA.key, body);
      expect(res.status).toBe(400);
      expect(((await res.json()) as { statusCode: number }).statusCode).toBe(
        STATUS_INVALID_REQUEST,
      );
    });

    it.each([
      ['text/plain', 'text/plain'],
      ['application/x-www-form-urlencoded', 'application/x-www-form-urlencoded'],
      ['application/jsonx', 'application/jsonx'],
      ['application/json-patch+json', 'application/json-patch+json'],
    ])('wrong content type %s', async (_why, type) => {
      const s = await session();
      const res = await verify(
        service.app,
        keyA.key,
        { attestationToken: b64(token(s.serverNonce)), sessionReference: s.reference },
        { 'Content-Type': type },
      );
      expect(res.status).toBe(400);
      expect(((await res.json()) as { statusCode: number }).statusCode).toBe(
        STATUS_INVALID_REQUEST,
      );
      await expectActive(s);
    });

    it('no content type at all', async () => {
      const s = await session();
      const res = await service.app.request(`${BASE}/api/v1/attestation/verify`, {
        method: 'POST',
        headers: { 'X-Api-Key': keyA.key },
        body: new Blob([
          JSON.stringify({
            attestationToken: b64(token(s.serverNonce)),
            sessionReference: s.reference,
          }),
        ]),
      });
      expect(res.status).toBe(400);
      await expectActive(s);
    });

    it('accepts application/json with a charset and in other letter case', async () => {
      for (const type of ['application/json; charset=utf-8', 'Application/JSON']) {
        const s = await session();
        const res = await verify(
          service.app,
          keyA.key,
          { attestationToken: b64(token(s.serverNonce)), sessionReference: s.reference },
          { 'Content-Type': type },
        );
        expect(await res.json()).toMatchObject({ isValid: true });
      }
    });

    it('a sessionReference with a NUL character is not a 500', async () => {
      const res = await verify(service.app, keyA.key, {
        attestationToken: b64(token(new Uint8Array(32))),
        sessionReference: 'ses_\u0000x',
      });
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({ statusCode: STATUS_INVALID_REQUEST });
    });

    it('a sessionReference with a lone surrogate is an unknown session, not a 500', async () => {
      const res = await verify(
        service.app,
        keyA.key,
        '{"attestationToken":"AQID","sessionReference":"ses_\\ud800"}',
      );
      expect(res.status).toBe(200);
      expect(await res.text()).toBe(REJECTED);
    });
  });

  describe('verify: 413 over 64 KiB', () => {
    const big = (ref: string, size: number) => {
      const body = JSON.stringify({ attestationToken: 'AQID', sessionReference: ref, pad: '' });
      return body.replace('"pad":""', `"pad":"${'x'.repeat(size - body.length)}"`);
    };

    it('a body of exactly 64 KiB is read (valid JSON is accepted), one byte more is 413', async () => {
      const s = await session();
      const ok = big(s.reference, 65_536);
      expect(Buffer.byteLength(ok)).toBe(65_536);
      const first = await verify(service.app, keyA.key, ok);
      expect(first.status).toBe(200); // AQID is no token: rejected, and the session consumed
      const s2 = await session();
      const res = await verify(service.app, keyA.key, big(s2.reference, 65_537));
      expect(res.status).toBe(413);
      expect(await res.json()).toMatchObject({ statusCode: STATUS_INVALID_REQUEST });
      expect(res.headers.get('x-request-id')).toBeTruthy();
      await expectActive(s2);
    });

    it('decides from Content-Length before reading the body', async () => {
      let pulled = 0;
      const stream = new ReadableStream({
        pull(controller) {
          pulled++;
          controller.enqueue(new Uint8Array(1024));
        },
      });
      const res = await service.app.request(`${BASE}/api/v1/attestation/verify`, {
        method: 'POST',
        headers: {
          'X-Api-Key': keyA.key,
          'Content-Type': 'application/json',
          'Content-Length': '1000000',
        },
        body: stream,
        duplex: 'half',
      } as RequestInit);
      expect(res.status).toBe(413);
      expect(pulled).toBeLessThan(3);
      await stream.cancel().catch(() => {});
    });

    it('cuts a body without Content-Length (streamed) at 64 KiB', async () => {
      const s = await session();
      let sent = 0;
      const stream = new ReadableStream({
        pull(controller) {
          if (sent > 1_000_000) return controller.close();
          sent += 8192;
          controller.enqueue(
            new TextEncoder().encode(
              sent === 8192
                ? `{"sessionReference":"${s.reference}","x":"`.padEnd(8192, 'x')
                : 'x'.repeat(8192),
            ),
          );
        },
      });
      const res = await service.app.request(`${BASE}/api/v1/attestation/verify`, {
        method: 'POST',
        headers: {
          'X-Api-Key': keyA.key,
          'Content-Type': 'application/json',
          'Transfer-Encoding': 'chunked',
        },
        body: stream,
        duplex: 'half',
      } as RequestInit);
      expect(res.status).toBe(413);
      expect(sent).toBeLessThan(100_000);
      await expectActive(s);
    });

    it('checks the key before the size: no key and a huge body is 401', async () => {
      const res = await verify(service.app, undefined, big('ses_x', 70_000));
      expect(res.status).toBe(401);
    });
  });

  describe('session lifecycle', () => {
    it('a good token verifies once; the retry is rejected as consumed', async () => {
      const s = await session();
      const body = { attestationToken: b64(token(s.serverNonce)), sessionReference: s.reference };
      const first = await verify(service.app, keyA.key, body);
      expect(first.status).toBe(200);
      const json = (await first.json()) as Record<string, unknown>;
      expect(Object.keys(json).sort()).toEqual(['appleTokenDetails', 'isValid', 'statusCode']);
      expect(json).toEqual({
        isValid: true,
        statusCode: 0,
        appleTokenDetails: {
          keyIdentifier: b64(new Uint8Array(32).fill(7)),
          appId: 'ABCDE12345.com.example.bank',
          environment: 'Production',
          assertionCounter: 1,
          platform: 'iOS',
        },
      });
      expect(service.logs.last()).toMatchObject({
        isValid: true,
        approach: 'session',
        service: 'apple',
        apiKeyId: keyA.id,
        status: 200,
      });
      const retry = await verify(service.app, keyA.key, body);
      expect(retry.status).toBe(200);
      expect(await retry.text()).toBe(REJECTED);
      expect(service.logs.last()).toMatchObject({
        isValid: false,
        reason: 'session_consumed',
        approach: 'session',
      });
    });

    it('a rejected token consumes the session too', async () => {
      const s = await session();
      const bad = await verify(service.app, keyA.key, {
        attestationToken: b64(
          token(s.serverNonce, { evidence: appleEvidence(undefined, Buffer.from('forged')) }),
        ),
        sessionReference: s.reference,
      });
      expect(await bad.text()).toBe(REJECTED);
      expect(service.logs.last()).toMatchObject({
        reason: 'apple_signature_invalid',
        service: 'apple',
        isValid: false,
      });
      const good = await verify(service.app, keyA.key, {
        attestationToken: b64(token(s.serverNonce)),
        sessionReference: s.reference,
      });
      expect(await good.text()).toBe(REJECTED);
      expect(service.logs.last()).toMatchObject({ reason: 'session_consumed' });
    });

    it('base64 that is no token is a rejection (token_malformed), and consumes the session', async () => {
      const s = await session();
      const res = await verify(service.app, keyA.key, {
        attestationToken: b64(randomBytes(40)),
        sessionReference: s.reference,
      });
      expect(res.status).toBe(200);
      expect(await res.text()).toBe(REJECTED);
      expect(service.logs.last()).toMatchObject({ reason: 'token_malformed' });
      const retry = await verify(service.app, keyA.key, {
        attestationToken: b64(token(s.serverNonce)),
        sessionReference: s.reference,
      });
      expect(await retry.text()).toBe(REJECTED);
    });

    it('token_version_unsupported and service_unsupported are rejections', async () => {
      const s = await session();
      await verify(service.app, keyA.key, {
        attestationToken: b64(token(s.serverNonce, { v: new Uint8Array([0x02]) })),
        sessionReference: s.reference,
      });
      expect(service.logs.last()).toMatchObject({
        reason: 'token_version_unsupported',
        isValid: false,
      });
      const s2 = await session();
      const res = await verify(service.app, keyA.key, {
        attestationToken: b64(token(s2.serverNonce, { service: 'gms' })),
        sessionReference: s2.reference,
      });
      expect(await res.text()).toBe(REJECTED);
      expect(service.logs.last()).toMatchObject({ reason: 'service_unsupported' });
    });

    it('an unknown reference is session_unknown', async () => {
      const res = await verify(service.app, keyA.key, {
        attestationToken: b64(token(new Uint8Array(32))),
        sessionReference: 'ses_doesnotexist',
      });
      expect(await res.text()).toBe(REJECTED);
      expect(service.logs.last()).toMatchObject({ reason: 'session_unknown', approach: 'session' });
    });

    it("another key's session is unknown to it and stays active for its owner", async () => {
      const s = await session(keyA.key);
      const res = await verify(service.app, keyB.key, {
        attestationToken: b64(token(s.serverNonce)),
        sessionReference: s.reference,
      });
      expect(await res.text()).toBe(REJECTED);
      expect(service.logs.last()).toMatchObject({ reason: 'session_unknown', apiKeyId: keyB.id });
      await expectActive(s);
    });

    it('an expired session is rejected (session_expired), judged by the database clock', async () => {
      const short = createTestService(db, { sessionTtlSeconds: 0 });
      const { body } = await init(short.app, keyA.key);
      expect(Date.parse(body.expiresAtUtc)).toBeLessThanOrEqual(Date.now() + 1000);
      const res = await verify(short.app, keyA.key, {
        attestationToken: b64(token(nonceBytes(body.serverNonce))),
        sessionReference: body.sessionReference,
      });
      expect(await res.text()).toBe(REJECTED);
      expect(short.logs.last()).toMatchObject({ reason: 'session_expired' });
    });
  });

  describe('the final nonce', () => {
    it('serverNonce || deviceNonce with a deviceNonce; the parts alone or swapped do not match', async () => {
      const device = new Uint8Array(randomBytes(128));
      const attempt = async (
        tokenNonce: (server: Uint8Array) => Uint8Array,
        sendDevice: boolean,
      ) => {
        const s = await session();
        const res = await verify(service.app, keyA.key, {
          attestationToken: b64(token(tokenNonce(s.serverNonce))),
          sessionReference: s.reference,
          ...(sendDevice ? { deviceNonce: b64(device) } : {}),
        });
        return ((await res.json()) as { isValid: boolean }).isValid;
      };
      expect(await attempt((server) => concat(server, device), true)).toBe(true);
      expect(await attempt((server) => server, true)).toBe(false);
      expect(service.logs.last()).toMatchObject({ reason: 'nonce_mismatch' });
      expect(await attempt((server) => concat(device, server), true)).toBe(false);
      expect(await attempt((server) => concat(server, device), false)).toBe(false);
      expect(await attempt((server) => server, false)).toBe(true);
    });

    it('deviceNonce of 1 byte, base64url without padding, is accepted; a null deviceNonce is absent', async () => {
      const s = await session();
      const res = await verify(service.app, keyA.key, {
        attestationToken: b64(token(concat(s.serverNonce, Uint8Array.of(0xfb)))),
        sessionReference: s.reference,
        deviceNonce: '-w',
      });
      expect(await res.json()).toMatchObject({ isValid: true });
      const s2 = await session();
      const res2 = await verify(service.app, keyA.key, {
        attestationToken: b64(token(s2.serverNonce)),
        sessionReference: s2.reference,
        deviceNonce: null,
        expectedNonce: null,
      });
      expect(await res2.json()).toMatchObject({ isValid: true });
    });

    it('sessionless: expectedNonce of 16 and 512 bytes is the final nonce', async () => {
      for (const n of [16, 512]) {
        const expected = new Uint8Array(randomBytes(n));
        const res = await verify(service.app, keyA.key, {
          attestationToken: Buffer.from(token(expected)).toString('base64url'),
          expectedNonce: b64(expected),
          sessionReference: null,
        });
        expect(await res.json()).toEqual({
          isValid: true,
          statusCode: 0,
          appleTokenDetails: expect.any(Object),
        });
        expect(service.logs.last()).toMatchObject({ approach: 'sessionless', isValid: true });
      }
      const other = await verify(service.app, keyA.key, {
        attestationToken: b64(token(new Uint8Array(16))),
        expectedNonce: b64(new Uint8Array(16).fill(1)),
      });
      expect(await other.text()).toBe(REJECTED);
      expect(service.logs.last()).toMatchObject({
        reason: 'nonce_mismatch',
        approach: 'sessionless',
      });
    });

    it('sessionless verify can be repeated (no session to consume)', async () => {
      const expected = new Uint8Array(randomBytes(20));
      for (let i = 0; i < 2; i++) {
        const res = await verify(service.app, keyA.key, {
          attestationToken: b64(token(expected)),
          expectedNonce: b64(expected),
        });
        expect(await res.json()).toMatchObject({ isValid: true });
      }
    });
  });

  describe('authentication', () => {
    const snapshot = async (res: Response) => ({
      status: res.status,
      body: await res.text(),
      headers: [...res.headers.entries()]
        .filter(([k]) => k !== 'x-request-id' && k !== 'date')
        .sort(),
    });

    it('absent or empty X-Api-Key: 401, identical responses, before any business logic', async () => {
      const absent = await snapshot(
        await verify(service.app, undefined, {
          attestationToken: 'AQID',
          expectedNonce: b64(new Uint8Array(16)),
        }),
      );
      const empty = await snapshot(
        await verify(service.app, '', {
          attestationToken: 'AQID',
          expectedNonce: b64(new Uint8Array(16)),
        }),
      );
      const blank = await snapshot(await verify(service.app, '   ', 'not even json'));
      const initAbsent = await snapshot(
        await service.app.request(`${BASE}/api/v1/attestation/init`, { method: 'POST' }),
      );
      expect(absent.status).toBe(401);
      expect(empty).toEqual(absent);
      expect(blank).toEqual(absent);
      expect(initAbsent.status).toBe(401);
      expect(absent.body).toBe('');
      expect(service.logs.requests().map((l) => l.auth)).toEqual([
        'missing',
        'missing',
        'missing',
        'missing',
      ]);
    });

    it('every other non-live key is 403 with an identical response; the cause is only in the log', async () => {
      const revoked = await issueKey(db, { name: 'revoked' });
      await createApiKeyRepository(db.db).revoke(revoked.id);
      const expired = await issueKey(db, { name: 'expired', expiresInSeconds: 1 });
      await new Promise((r) => setTimeout(r, 1100));
      const underscored = await issueKey(db, { name: 'underscore', secretWith: /[_-]/ });
      const secret = underscored.key.slice(-43);
      const pos = secret.search(/[_-]/);
      // same id, a secret that differs in one character next to the `_`/`-`
      const neighbour = pos > 0 ? pos - 1 : pos + 1;
      const swapped =
        secret.slice(0, neighbour) +
        (secret[neighbour] === 'A' ? 'B' : 'A') +
        secret.slice(neighbour + 1);
      const wrongSecret = underscored.key.slice(0, -43) + swapped;
      const unknown = `attest_${'0'.repeat(16)}${'A'.repeat(43)}`;
      const presented: [string, string][] = [
        ['malformed', 'hello'],
        ['malformed', `${keyA.key}x`],
        ['malformed', keyA.key.replace('attest_', 'attest-')],
        ['unknown', unknown],
        ['revoked', revoked.key],
        ['expired', expired.key],
        ['mismatch', wrongSecret],
        ['mismatch', keyA.key.slice(0, -1) + (keyA.key.endsWith('A') ? 'B' : 'A')],
      ];
      const first = await snapshot(
        await verify(service.app, presented[0]![1], {
          attestationToken: 'AQID',
          expectedNonce: b64(new Uint8Array(16)),
        }),
      );
      expect(first.status).toBe(403);
      expect(first.body).toBe('');
      for (const [, key] of presented.slice(1)) {
        expect(
          await snapshot(
            await verify(service.app, key, {
              attestationToken: 'AQID',
              expectedNonce: b64(new Uint8Array(16)),
            }),
          ),
        ).toEqual(first);
        expect(
          await snapshot(
            await service.app.request(`${BASE}/api/v1/attestation/init`, {
              method: 'POST',
              headers: { 'X-Api-Key': key },
            }),
          ),
        ).toEqual(first);
      }
      const causes = service.logs
        .requests()
        .filter((_, i) => i % 2 === 1 || i === 0)
        .map((l) => l.auth);
      expect(new Set(causes)).toEqual(
        new Set(['malformed', 'unknown', 'revoked', 'expired', 'mismatch']),
      );
      // the key with `_`/`-` in its secret works when presented whole
      const ok = await init(service.app, underscored.key);
      expect(ok.res.status).toBe(200);
    });

    it('too many never-seen keys at once: 503 with Retry-After and 268505088, then fine', async () => {
      const busy = createTestService(db, { auth: { maxConcurrentHashes: 1, maxQueuedHashes: 0 } });
      const fresh = await Promise.all([0, 1, 2].map(() => issueKey(db, { name: 'fresh' })));
      const responses = await Promise.all(
        fresh.map((k) =>
          busy.app.request(`${BASE}/api/v1/attestation/init`, {
            method: 'POST',
            headers: { 'X-Api-Key': k.key },
          }),
        ),
      );
      const refused = responses.filter((r) => r.status === 503);
      expect(refused.length).toBeGreaterThanOrEqual(1);
      for (const r of refused) {
        expect(r.headers.get('retry-after')).toBe('1');
        expect(r.headers.get('x-request-id')).toBeTruthy();
        expect(await r.json()).toMatchObject({ statusCode: STATUS_INTERNAL_ERROR });
      }
      expect(responses.filter((r) => r.status === 200).length).toBeGreaterThanOrEqual(1);
      // a retry goes through
      for (const k of fresh) expect((await init(busy.app, k.key)).res.status).toBe(200);
    });

    it('the header name is case-insensitive', async () => {
      const res = await service.app.request(`${BASE}/api/v1/attestation/init`, {
        method: 'POST',
        headers: { 'x-api-key': keyA.key },
      });
      expect(res.status).toBe(200);
      const res2 = await service.app.request(`${BASE}/api/v1/attestation/init`, {
        method: 'POST',
        headers: { 'X-API-KEY': keyA.key },
      });
      expect(res2.status).toBe(200);
    });

    it('revocation takes effect within the revalidation window (injected clock)', async () => {
      let now = Date.now();
      const clocked = createTestService(db, { auth: { now: () => now } });
      const key = await issueKey(db, { name: 'to revoke' });
      expect((await init(clocked.app, key.key)).res.status).toBe(200);
      await createApiKeyRepository(db.db).revoke(key.id);
      now += 4_000;
      expect((await init(clocked.app, key.key)).res.status).toBe(200); // still within 5 s of the last check
      now += 1_001;
      const res = await clocked.app.request(`${BASE}/api/v1/attestation/init`, {
        method: 'POST',
        headers: { 'X-Api-Key': key.key },
      });
      expect(res.status).toBe(403);
      expect(clocked.logs.last()).toMatchObject({ auth: 'revoked', apiKeyId: key.id });
      now += 60_000;
      expect(
        (
          await clocked.app.request(`${BASE}/api/v1/attestation/init`, {
            method: 'POST',
            headers: { 'X-Api-Key': key.key },
          })
        ).status,
      ).toBe(403);
    });

    it('expiry takes effect at once for a cached key (injected clock)', async () => {
      let now = 0;
      const clocked = createTestService(db, { auth: { now: () => now } });
      const key = await issueKey(db, { name: 'short', expiresInSeconds: 3600 });
      // read after issuing: on a loaded machine issuing (argon2) can take over the 1 s margin below
      now = Date.now();
      expect((await init(clocked.app, key.key)).res.status).toBe(200);
      now += 3_601_000;
      const res = await clocked.app.request(`${BASE}/api/v1/attestation/init`, {
        method: 'POST',
        headers: { 'X-Api-Key': key.key },
      });
      expect(res.status).toBe(403);
      expect(clocked.logs.last()).toMatchObject({ auth: 'expired' });
    });
  });

  describe('routing', () => {
    it('under /api/ the key comes before 404 and 405', async () => {
      const get = (path: string, key?: string, method = 'GET') =>
        service.app.request(`${BASE}${path}`, { method, headers: key ? { 'X-Api-Key': key } : {} });
      expect((await get('/api/v1/nope')).status).toBe(401);
      expect((await get('/api/v1/nope', 'attest_bad')).status).toBe(403);
      const notFound = await get('/api/v1/nope', keyA.key);
      expect(notFound.status).toBe(404);
      expect(await notFound.json()).toMatchObject({ statusCode: STATUS_INVALID_REQUEST });
      expect((await get('/api/v1/attestation/verify')).status).toBe(401);
      const wrongMethod = await get('/api/v1/attestation/verify', keyA.key);
      expect(wrongMethod.status).toBe(405);
      expect(wrongMethod.headers.get('allow')).toBe('POST');
      expect((await get('/api/v1/attestation/init', keyA.key, 'PUT')).status).toBe(405);
      expect((await get('/api/v2/attestation/init', keyA.key, 'POST')).status).toBe(404);
    });

    it('outside /api/ no key is needed: 404 and 405', async () => {
      expect((await service.app.request(`${BASE}/nope`)).status).toBe(404);
      const res = await service.app.request(`${BASE}/healthz`, { method: 'POST' });
      expect(res.status).toBe(405);
      expect(res.headers.get('allow')).toContain('GET');
      expect((await service.app.request(`${BASE}/metrics`, { method: 'DELETE' })).status).toBe(405);
    });

    it('/docs/ redirects to the reference page at /docs', async () => {
      const res = await service.app.request(`${BASE}/docs/`);
      expect(res.status).toBe(301);
      expect(res.headers.get('location')).toBe('/docs');
      expect((await service.app.request(`${BASE}/docs`)).status).toBe(200);
    });

    it('/healthz, /readyz, /metrics, /openapi.json', async () => {
      const health = await service.app.request(`${BASE}/healthz`);
      expect(health.status).toBe(200);
      const ready = await service.app.request(`${BASE}/readyz`);
      expect(ready.status).toBe(200);
      expect(await ready.json()).toEqual({ status: 'ready' });

      const s = await session();
      await verify(service.app, keyA.key, {
        attestationToken: b64(token(new Uint8Array(32))),
        sessionReference: s.reference,
      });
      const metrics = await service.app.request(`${BASE}/metrics`);
      expect(metrics.status).toBe(200);
      expect(metrics.headers.get('content-type')).toMatch(/^text\/plain/);
      const text = await metrics.text();
      expect(text).toMatch(
        /attest_verify_total\{service="apple",valid="false",reason="nonce_mismatch",mode="live"\} \d+/,
      );
      expect(text).toMatch(
        /attest_http_requests_total\{route="\/api\/v1\/attestation\/init",method="POST",status="200"\}/,
      );
      expect(text).toMatch(/attest_http_request_duration_seconds_bucket/);
      expect(text).toMatch(/attest_sessions\{state="active"\} \d+/);
      expect(text).not.toContain(s.reference);

      const openapi = await service.app.request(`${BASE}/openapi.json`);
      const doc = (await openapi.json()) as {
        openapi: string;
        paths: Record<string, Record<string, { responses: Record<string, unknown> }>>;
      };
      expect(doc.openapi).toMatch(/^3\.1/);
      expect(Object.keys(doc.paths)).toEqual(
        expect.arrayContaining(['/api/v1/attestation/init', '/api/v1/attestation/verify']),
      );
      expect(Object.keys(doc.paths['/api/v1/attestation/verify']!.post!.responses).sort()).toEqual(
        expect.arrayContaining(['200', '400', '401', '403', '413', '500']),
      );
      expect(Object.keys(doc.paths['/api/v1/attestation/init']!.post!.responses)).toEqual(
        expect.arrayContaining(['200', '401', '403', '500']),
      );
    });

    it('/readyz is 503 when the database is not ready or ready() fails or hangs', async () => {
      for (const ready of [
        async () => false,
        async () => {
          throw new Error('down');
        },
        () => new Promise<boolean>(() => {}),
      ]) {
        const s = createTestService(db, { ready, requestDeadlineMs: 200 });
        const res = await s.app.request(`${BASE}/readyz`);
        expect(res.status).toBe(503);
      }
    });
  });

  describe('faults', () => {
    it('a crashing verifier is 500 268505088, never isValid', async () => {
      const broken = createTestService(db, {
        verify: async () => {
          throw new Error(`boom ${keyA.key}`);
        },
      });
      const s = await session();
      const res = await verify(broken.app, keyA.key, {
        attestationToken: b64(token(s.serverNonce)),
        sessionReference: s.reference,
      });
      expect(res.status).toBe(500);
      const body = (await res.json()) as Record<string, unknown>;
      expect(body).toEqual({ statusCode: STATUS_INTERNAL_ERROR, errorMessage: expect.any(String) });
      expect(broken.logs.last()).toMatchObject({ status: 500, err: { type: 'Error' } });
      expect(res.headers.get('x-request-id')).toBeTruthy();
    });

    it('a crashing session store is 500 on init and verify', async () => {
      const broken = createTestService(db, {
        sessions: {
          create: async () => {
            throw new Error('db down');
          },
          consume: async () => {
            throw new Error('db down');
          },
        },
      });
      const i = await broken.app.request(`${BASE}/api/v1/attestation/init`, {
        method: 'POST',
        headers: { 'X-Api-Key': keyA.key },
      });
      expect(i.status).toBe(500);
      expect(await i.json()).toMatchObject({ statusCode: STATUS_INTERNAL_ERROR });
      const v = await verify(broken.app, keyA.key, {
        attestationToken: 'AQID',
        sessionReference: 'ses_x',
      });
      expect(v.status).toBe(500);
      // validation still comes first: a malformed request is 400 even while the store is down
      const bad = await verify(broken.app, keyA.key, {
        attestationToken: '',
        sessionReference: 'ses_x',
      });
      expect(bad.status).toBe(400);
      expect(await bad.json()).toMatchObject({ statusCode: STATUS_INVALID_REQUEST });
    });
  });

  describe('X-Request-Id', () => {
    it('echoes a valid id on every kind of response and logs it', async () => {
      const id = 'abc.DEF_1:2-3';
      const responses = [
        await service.app.request(`${BASE}/healthz`, { headers: { 'X-Request-Id': id } }),
        await service.app.request(`${BASE}/nope`, { headers: { 'X-Request-Id': id } }),
        await service.app.request(`${BASE}/api/v1/attestation/init`, {
          method: 'POST',
          headers: { 'X-Request-Id': id },
        }),
        await service.app.request(`${BASE}/api/v1/attestation/init`, {
          method: 'POST',
          headers: { 'X-Request-Id': id, 'X-Api-Key': 'nope' },
        }),
        await verify(service.app, keyA.key, '{', { 'X-Request-Id': id }),
        await verify(
          service.app,
          keyA.key,
          { attestationToken: 'AQID', sessionReference: 'ses_none' },
          { 'X-Request-Id': id },
        ),
      ];
      expect(responses.map((r) => r.status)).toEqual([200, 404, 401, 403, 400, 200]);
      for (const r of responses) expect(r.headers.get('x-request-id')).toBe(id);
      expect(service.logs.requests().map((l) => l.requestId)).toEqual(responses.map(() => id));
    });

    it('accepts 128 characters and replaces 129, bad characters, or an empty id', async () => {
      const ok = 'a'.repeat(128);
      expect(
        (
          await service.app.request(`${BASE}/healthz`, { headers: { 'X-Request-Id': ok } })
        ).headers.get('x-request-id'),
      ).toBe(ok);
      const seen = new Set<string>();
      for (const bad of ['a'.repeat(129), 'has space', 'semi;colon', 'slash/', 'ünï', '<script>']) {
        const res = await service.app.request(`${BASE}/healthz`, {
          headers: { 'X-Request-Id': bad },
        });
        const got = res.headers.get('x-request-id')!;
        expect(got).not.toBe(bad);
        expect(got).toMatch(/^[A-Za-z0-9._:-]{1,128}$/);
        seen.add(got);
        expect(service.logs.last().requestId).toBe(got);
      }
      expect(seen.size).toBe(6);
      const none = await service.app.request(`${BASE}/healthz`);
      expect(none.headers.get('x-request-id')).toMatch(/^[A-Za-z0-9._:-]{1,128}$/);
    });
  });

  describe('the log line', () => {
    it('has every field, once per request, and never a key, token, session reference or nonce', async () => {
      const s = await session();
      const device = new Uint8Array(randomBytes(16));
      const tokenText = b64(token(concat(s.serverNonce, device)));
      const res = await verify(
        service.app,
        keyA.key,
        { attestationToken: tokenText, sessionReference: s.reference, deviceNonce: b64(device) },
        { 'X-Request-Id': 'req-1' },
      );
      expect(await res.json()).toMatchObject({ isValid: true });
      await verify(
        service.app,
        keyA.key,
        { attestationToken: tokenText, sessionReference: s.reference },
        { 'X-Request-Id': 'req-2' },
      );
      const expected = new Uint8Array(randomBytes(24));
      const sessionlessToken = b64(token(expected));
      await verify(
        service.app,
        keyA.key,
        { attestationToken: sessionlessToken, expectedNonce: b64(new Uint8Array(24)) },
        { 'X-Request-Id': 'req-3' },
      );
      await verify(
        service.app,
        keyA.key,
        { attestationToken: tokenText, sessionReference: 'x', expectedNonce: b64(expected) },
        { 'X-Request-Id': 'req-4' },
      );

      const lines = service.logs.requests();
      expect(lines).toHaveLength(5); // init + 4 verifies
      const [initLine, ok, consumed, mismatch, invalid] = lines as Record<string, unknown>[];
      expect(initLine).toMatchObject({
        route: '/api/v1/attestation/init',
        status: 200,
        apiKeyId: keyA.id,
      });
      for (const l of lines) {
        expect(typeof l.requestId).toBe('string');
        expect(typeof l.durationMs).toBe('number');
        expect(l.durationMs as number).toBeGreaterThanOrEqual(0);
        expect(l.apiKeyId).toBe(keyA.id);
      }
      expect(ok).toMatchObject({
        requestId: 'req-1',
        route: '/api/v1/attestation/verify',
        status: 200,
        approach: 'session',
        service: 'apple',
        isValid: true,
        keyId: b64(new Uint8Array(32).fill(7)),
      });
      expect(consumed).toMatchObject({
        requestId: 'req-2',
        approach: 'session',
        isValid: false,
        reason: 'session_consumed',
        detail: expect.any(String),
      });
      expect(mismatch).toMatchObject({
        requestId: 'req-3',
        approach: 'sessionless',
        service: 'apple',
        isValid: false,
        reason: 'nonce_mismatch',
        detail: expect.any(String),
      });
      expect(invalid).toMatchObject({ requestId: 'req-4', status: 400 });

      const all = service.logs.raw.join('\n');
      const secrets = {
        apiKey: keyA.key,
        apiKeySecret: keyA.key.slice(-43),
        token: tokenText,
        tokenUrl: Buffer.from(tokenText, 'base64').toString('base64url'),
        sessionlessToken,
        sessionReference: s.reference,
        serverNonce: b64(s.serverNonce),
        serverNonceHex: Buffer.from(s.serverNonce).toString('hex'),
        deviceNonce: b64(device),
        expectedNonce: b64(expected),
      };
      for (const [what, secret] of Object.entries(secrets))
        expect(all.includes(secret), what).toBe(false);
    });

    it('a 500 log line carries no secret from the error', async () => {
      const leaky = createTestService(db, {
        verify: async () => {
          throw Object.assign(new Error('Failed query: select ... params: ses_secret'), {
            name: 'DrizzleQueryError',
          });
        },
      });
      const res = await verify(leaky.app, keyA.key, {
        attestationToken: 'AQID',
        expectedNonce: b64(new Uint8Array(16)),
      });
      expect(res.status).toBe(500);
      expect(leaky.logs.raw.join('\n')).not.toContain('ses_secret');
      expect(leaky.logs.raw.join('\n')).not.toContain(keyA.key);
    });
  });
});
