// Test-mode API keys in the HTTP app: the mode reaches the verifier, the log line and the
// metrics; with test keys off they answer 403 (cause in the log); sessions stay per key.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { KeyMode } from '../../src/core/ports.js';
import { backends, useDatabase } from '../support/databases.js';
import { BASE, createTestService, init, issueKey, verify } from '../support/service.js';
import { b64, fakeVerify, token } from '../support/tokens.js';

describe.each(backends())('test-mode API keys on $name', (backend) => {
  const db = useDatabase(backend);
  let live: { id: string; key: string };
  let test: { id: string; key: string };

  beforeEach(async () => {
    live = await issueKey(db, { name: 'live' });
    test = await issueKey(db, { name: 'test', mode: 'test' });
  });

  /** the fake verifier, recording which mode each verification ran in */
  function service(options: { testKeys?: boolean } = {}) {
    const modes: KeyMode[] = [];
    const inner = fakeVerify();
    const s = createTestService(db, {
      ...options,
      verify: (input, mode) => (modes.push(mode), inner(input)),
    });
    return { ...s, modes };
  }

  it('each key verifies in its own mode; the log line and the verify metrics carry it', async () => {
    const s = service();
    const nonce = new Uint8Array(32).fill(3);
    for (const key of [live, test]) {
      const res = await verify(s.app, key.key, {
        attestationToken: b64(token(nonce)),
        expectedNonce: b64(nonce),
      });
      expect(await res.json()).toMatchObject({ isValid: true });
      expect(s.logs.last()).toMatchObject({
        apiKeyId: key.id,
        mode: key === test ? 'test' : 'live',
        isValid: true,
      });
    }
    expect(s.modes).toEqual(['live', 'test']);
    const bad = await verify(s.app, test.key, {
      attestationToken: b64(token(nonce)),
      expectedNonce: b64(new Uint8Array(32).fill(4)),
    });
    expect(await bad.json()).toEqual({ isValid: false, statusCode: 0 });
    const text = await (await s.app.request(`${BASE}/metrics`)).text();
    expect(text).toMatch(
      /attest_verify_total\{service="apple",valid="true",reason="none",mode="live"\} 1/,
    );
    expect(text).toMatch(
      /attest_verify_total\{service="apple",valid="true",reason="none",mode="test"\} 1/,
    );
    expect(text).toMatch(
      /attest_verify_total\{service="apple",valid="false",reason="nonce_mismatch",mode="test"\} 1/,
    );
  });

  it('sessions of a test key are its own, as for live keys', async () => {
    const s = service();
    const { body } = await init(s.app, test.key);
    const nonce = Buffer.from(body.serverNonce, 'base64');
    const byLive = await verify(s.app, live.key, {
      attestationToken: b64(token(nonce)),
      sessionReference: body.sessionReference,
    });
    expect(await byLive.json()).toEqual({ isValid: false, statusCode: 0 });
    expect(s.logs.last()).toMatchObject({ mode: 'live', reason: 'session_unknown' });
    const byTest = await verify(s.app, test.key, {
      attestationToken: b64(token(nonce)),
      sessionReference: body.sessionReference,
    });
    expect(await byTest.json()).toMatchObject({ isValid: true });
  });

  it('with test keys off, a test key answers 403 on every route (cause test_keys_disabled); live keys work', async () => {
    const s = service({ testKeys: false });
    const refused = await s.app.request(`${BASE}/api/v1/attestation/init`, {
      method: 'POST',
      headers: { 'X-Api-Key': test.key },
    });
    expect(refused.status).toBe(403);
    expect(s.logs.last()).toMatchObject({
      status: 403,
      apiKeyId: test.id,
      mode: 'test',
      auth: 'test_keys_disabled',
    });
    const nonce = new Uint8Array(32).fill(5);
    const res = await verify(s.app, test.key, {
      attestationToken: b64(token(nonce)),
      expectedNonce: b64(nonce),
    });
    expect(res.status).toBe(403);
    expect(s.modes).toEqual([]);
    const ok = await init(s.app, live.key);
    expect(ok.res.status).toBe(200);
  });
});
