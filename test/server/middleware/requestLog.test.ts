import { Hono } from 'hono';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { AppEnv } from '../../../src/server/appEnv.js';
import { loggerOptions } from '../../../src/server/logger.js';
import { requestLog } from '../../../src/server/middleware/requestLog.js';

function setup() {
  const lines: Record<string, unknown>[] = [];
  const logger = pino(loggerOptions('info'), { write: (s: string) => lines.push(JSON.parse(s)) });
  const observed: unknown[][] = [];
  const metrics = { observeRequest: (...args: unknown[]) => observed.push(args) };
  const app = new Hono<AppEnv>();
  app.use('*', requestLog({ logger, metrics, routes: { '/known': ['POST'], '/boom': ['GET'] } }));
  app.post('/known', (c) => {
    const log = c.get('log');
    log.apiKeyId = 'key_1';
    log.isValid = false;
    log.reason = 'nonce_mismatch';
    return c.json({ ok: true });
  });
  app.get('/boom', () => {
    throw new Error('fault');
  });
  app.onError((_err, c) => c.json({}, 500));
  return { app, lines, observed };
}

describe('requestLog', () => {
  it('writes one line with the handler facts, status, duration and request id, and no secrets', async () => {
    const { app, lines, observed } = setup();
    const res = await app.request('/known', {
      method: 'POST',
      headers: {
        'x-request-id': 'abc-123',
        'x-api-key': 'ak_live_supersecret',
        'content-type': 'application/json',
      },
      body: JSON.stringify({ token: 'secret-token' }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-request-id')).toBe('abc-123');
    expect(lines).toHaveLength(1);
    const line = lines[0]!;
    expect(line).toMatchObject({
      level: 30,
      msg: 'request',
      requestId: 'abc-123',
      method: 'POST',
      route: '/known',
      status: 200,
      apiKeyId: 'key_1',
      isValid: false,
      reason: 'nonce_mismatch',
    });
    expect(typeof line.durationMs).toBe('number');
    const text = JSON.stringify(line);
    expect(text).not.toContain('supersecret');
    expect(text).not.toContain('secret-token');
    expect(observed).toEqual([['/known', 'POST', 200, expect.any(Number)]]);
  });

  it('replaces an invalid request id with a UUID and labels unknown paths "unmatched"', async () => {
    const { app, lines, observed } = setup();
    const res = await app.request('/nope?x=1', {
      headers: { 'x-request-id': 'bad id with spaces' },
    });
    expect(res.status).toBe(404);
    const id = res.headers.get('x-request-id');
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(lines[0]).toMatchObject({ requestId: id, route: 'unmatched', status: 404 });
    expect(observed[0]?.[0]).toBe('unmatched');
  });

  it('logs a 5xx at level error', async () => {
    const { app, lines } = setup();
    const res = await app.request('/boom');
    expect(res.status).toBe(500);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 50, route: '/boom', status: 500 });
    expect(res.headers.get('x-request-id')).toBe(lines[0]!.requestId);
  });
});
