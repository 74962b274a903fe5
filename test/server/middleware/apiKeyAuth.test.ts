import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import type { AuthContext, AuthResult } from '../../../src/server/apiKeyAuthTypes.js';
import type { AppEnv, RequestLog } from '../../../src/server/appEnv.js';
import { STATUS_INTERNAL_ERROR } from '../../../src/server/errorBody.js';
import { apiKeyAuth } from '../../../src/server/middleware/apiKeyAuth.js';
import { backendBudget } from '../../../src/server/middleware/backendBudget.js';

function setup(result: AuthResult, testKeys?: boolean) {
  const calls: { presented: string | undefined; context: AuthContext }[] = [];
  const auth = {
    authenticate: async (presented: string | undefined, context: AuthContext = {}) => {
      calls.push({ presented, context });
      return result;
    },
  };
  const logs: RequestLog[] = [];
  let reached: { keyId: string; mode: string } | undefined;
  const app = new Hono<AppEnv>();
  app.use('*', async (c, next) => {
    const log: RequestLog = { requestId: 'r', method: c.req.method, route: c.req.path };
    logs.push(log);
    c.set('log', log);
    await next();
  });
  app.use('*', backendBudget({ deadlineMs: 1000 }));
  app.use('*', apiKeyAuth({ auth, testKeys }));
  app.post('/x', (c) => {
    reached = { keyId: c.get('keyId'), mode: c.get('mode') };
    return c.json({ fine: true });
  });
  const send = () =>
    app.request('/x', { method: 'POST', headers: { 'x-api-key': 'ak_presented' } });
  return { send, calls, logs, reached: () => reached };
}

describe('apiKeyAuth', () => {
  it('lets a good key through with its id and mode, and logs them', async () => {
    const t = setup({ ok: true, keyId: 'key_1', mode: 'live' });
    const res = await t.send();
    expect(res.status).toBe(200);
    expect(t.reached()).toEqual({ keyId: 'key_1', mode: 'live' });
    expect(t.logs[0]).toMatchObject({ apiKeyId: 'key_1', mode: 'live' });
    expect(t.logs[0]!.auth).toBeUndefined();
    expect(t.calls[0]!.presented).toBe('ak_presented');
    expect(typeof t.calls[0]!.context.backend).toBe('function');
  });

  it.each([
    [401, 'unknown'],
    [401, 'mismatch'],
    [403, 'revoked'],
  ] as const)('answers %i with no body for %s, and stops there', async (status, why) => {
    const t = setup({ ok: false, status, why, keyId: 'key_9' });
    const res = await t.send();
    expect(res.status).toBe(status);
    expect(await res.text()).toBe('');
    expect(t.reached()).toBeUndefined();
    expect(t.logs[0]).toMatchObject({ auth: why, apiKeyId: 'key_9' });
  });

  it('answers 503 with Retry-After when the hash queue is busy', async () => {
    const t = setup({ ok: false, status: 503, why: 'busy' });
    const res = await t.send();
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(await res.json()).toEqual({
      statusCode: STATUS_INTERNAL_ERROR,
      errorMessage: 'Busy, retry shortly',
    });
    expect(t.reached()).toBeUndefined();
  });

  it('refuses a test-mode key with 403 when test keys are off, and accepts it otherwise', async () => {
    const off = setup({ ok: true, keyId: 'key_t', mode: 'test' }, false);
    const res = await off.send();
    expect(res.status).toBe(403);
    expect(off.reached()).toBeUndefined();
    expect(off.logs[0]).toMatchObject({
      auth: 'test_keys_disabled',
      apiKeyId: 'key_t',
      mode: 'test',
    });
    const on = setup({ ok: true, keyId: 'key_t', mode: 'test' });
    expect((await on.send()).status).toBe(200);
    expect(on.reached()).toEqual({ keyId: 'key_t', mode: 'test' });
  });
});
