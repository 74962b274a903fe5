import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createApp } from '../../src/server/app.js';
import { createMetrics } from '../../src/server/metrics.js';
import { startServer, type RunningServer } from '../../src/server/start.js';
import { BASE, captureLogger, issueKey } from '../support/service.js';
import { fakeVerify } from '../support/tokens.js';

const counts = { active: 3, consumed: 2, expired: 1 };

describe('the database breaker gauge', () => {
  it('reads 1 while the breaker is open and 0 once it closes, at each scrape', async () => {
    let open = false;
    const metrics = createMetrics({ databaseBreakerOpen: () => open });
    expect(await metrics.registry.metrics()).toContain('attest_database_breaker_open 0');
    open = true;
    expect(await metrics.registry.metrics()).toContain('attest_database_breaker_open 1');
    open = false;
    expect(await metrics.registry.metrics()).toContain('attest_database_breaker_open 0');
  });

  it('is absent where there is no breaker', async () => {
    expect(await createMetrics().registry.metrics()).not.toContain('attest_database_breaker_open');
  });
});

describe('session gauges', () => {
  it('any number of scrapes read the sessions table at most once per sessionCountsMaxAgeMs', async () => {
    let now = 1_000_000;
    const read = vi.fn(async () => ({ ...counts }));
    const metrics = createMetrics({
      sessionCounts: read,
      sessionCountsMaxAgeMs: 15_000,
      now: () => now,
    });
    for (let i = 0; i < 50; i++)
      expect(await metrics.registry.metrics()).toContain('attest_sessions{state="active"} 3');
    expect(read).toHaveBeenCalledTimes(1);
    now += 14_999;
    await metrics.registry.metrics();
    expect(read).toHaveBeenCalledTimes(1);
    now += 1;
    read.mockResolvedValue({ active: 7, consumed: 2, expired: 1 });
    await metrics.registry.metrics(); // starts the refresh, answers the last values at once
    expect(read).toHaveBeenCalledTimes(2);
    await vi.waitFor(async () =>
      expect(await metrics.registry.metrics()).toContain('attest_sessions{state="active"} 7'),
    );
    expect(read).toHaveBeenCalledTimes(2);
  });

  it('one query at a time: concurrent scrapes share one slow read, and later scrapes do not wait for it', async () => {
    let now = 0;
    let release!: () => void;
    const read = vi.fn(async () => ({ ...counts }));
    const metrics = createMetrics({
      sessionCounts: read,
      sessionCountsMaxAgeMs: 1000,
      now: () => now,
    });
    await metrics.registry.metrics();
    read.mockImplementation(
      () =>
        new Promise((resolve) => (release = () => resolve({ active: 9, consumed: 0, expired: 0 }))),
    );
    now += 5000;
    const scrapes = await Promise.all(Array.from({ length: 12 }, () => metrics.registry.metrics()));
    expect(read).toHaveBeenCalledTimes(2);
    // the read is still pending: every scrape answered the previous values without waiting
    for (const text of scrapes) expect(text).toContain('attest_sessions{state="active"} 3');
    now += 5000; // stale again, but the read under way is not doubled
    await metrics.registry.metrics();
    expect(read).toHaveBeenCalledTimes(2);
    release();
    await vi.waitFor(async () =>
      expect(await metrics.registry.metrics()).toContain('attest_sessions{state="active"} 9'),
    );
  });

  it('a failing read leaves the gauge out and is not retried on every scrape', async () => {
    const read = vi.fn(async () => {
      throw new Error('db down');
    });
    const metrics = createMetrics({ sessionCounts: read, now: () => 0 });
    for (let i = 0; i < 5; i++)
      expect(await metrics.registry.metrics()).not.toContain('attest_sessions{');
    expect(read).toHaveBeenCalledTimes(1);
  });
});

describe('/metrics apart from the API', () => {
  it('createApp without the metrics route answers /metrics 404 (not 405)', async () => {
    const { logger } = captureLogger();
    const app = createApp({
      logger,
      auth: { authenticate: async () => ({ ok: false, status: 401, why: 'missing' }) },
      sessions: {
        create: async () => ({ expiresAt: new Date() }),
        consume: async () => ({ ok: false, reason: 'session_unknown' }),
      },
      verify: fakeVerify(),
      metrics: createMetrics(),
      ready: async () => true,
      sessionTtlSeconds: 300,
      metricsRoute: false,
    });
    expect((await app.request(`${BASE}/metrics`)).status).toBe(404);
    expect((await app.request(`${BASE}/metrics`, { method: 'POST' })).status).toBe(404);
    expect((await app.request(`${BASE}/healthz`)).status).toBe(200);
  });

  describe('startServer with ATTEST_METRICS_PORT', () => {
    let dir: string;
    let server: RunningServer;
    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'attest-metrics-'));
      const { logger } = captureLogger();
      const config = loadConfig(
        { dataDir: dir, port: 0, host: '127.0.0.1' },
        { ATTEST_METRICS_PORT: '0' },
      );
      expect(config.metricsHost).toBe('127.0.0.1');
      server = await startServer(config, logger, { migrate: true });
    });
    afterAll(async () => {
      await server?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    it('serves /metrics on its own port and not on the API port', async () => {
      expect(server.metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
      expect(new URL(server.metricsUrl!).port).not.toBe(String(server.port));
      const { key } = await issueKey(server.database);
      expect(
        (
          await fetch(`${server.url}/api/v1/attestation/init`, {
            method: 'POST',
            headers: { 'X-Api-Key': key },
          })
        ).status,
      ).toBe(200);
      const scraped = await fetch(server.metricsUrl!);
      expect(scraped.status).toBe(200);
      const text = await scraped.text();
      expect(text).toContain('attest_sessions_created_total 1');
      expect(text).toMatch(/attest_sessions\{state="active"\} 1/);
      expect((await fetch(`${server.url}/metrics`)).status).toBe(404);
      expect(
        (
          await fetch(new URL('/api/v1/attestation/init', server.metricsUrl!), {
            method: 'POST',
            headers: { 'X-Api-Key': key },
          })
        ).status,
      ).toBe(404);
    });
  });
});
