/**
 * `GET /docs` in a real headless Chromium (Debian's `chromium`, driven by playwright-core): the
 * page renders the OpenAPI document with both operations, and loads nothing from anywhere but
 * the service itself (appliances run in closed networks). Plain requests check the assets and
 * the page's headers.
 */
import { existsSync } from 'node:fs';
import type { Server } from 'node:http';
import { serve } from '@hono/node-server';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, useDatabase } from '../support/databases.js';
import { createTestService } from '../support/service.js';

const CHROMIUM = '/usr/bin/chromium';

describe('GET /docs', () => {
  const db = useDatabase(backends()[0]!);
  let server: Server;
  let url: string;

  beforeAll(async () => {
    const { app } = createTestService(db);
    await new Promise<void>((resolve) => {
      server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) => {
        url = `http://127.0.0.1:${info.port}`;
        resolve();
      }) as Server;
    });
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('serves the page and its assets from the service, with a CSP allowing only itself', async () => {
    const page = await fetch(`${url}/docs`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    const html = await page.text();
    expect(html).not.toMatch(/https?:\/\//);
    for (const [file, type] of [
      ['swagger-ui-bundle.js', /javascript/],
      ['swagger-ui.css', /css/],
      ['init.js', /javascript/],
    ] as const) {
      const res = await fetch(`${url}/docs/${file}`);
      expect(res.status, file).toBe(200);
      expect(res.headers.get('content-type')).toMatch(type);
      expect((await res.arrayBuffer()).byteLength).toBeGreaterThan(10);
    }
    expect((await fetch(`${url}/docs/package.json`)).status).toBe(404);
    expect((await fetch(`${url}/docs/..%2Fpackage.json`)).status).toBe(404);
    expect((await fetch(`${url}/docs`, { method: 'POST' })).status).toBe(405);
  });

  describe.skipIf(!existsSync(CHROMIUM))('in headless Chromium', () => {
    let browser: Browser;

    // playwright gives the browser a fresh profile (--user-data-dir) of its own, removed on close
    beforeAll(async () => {
      browser = await chromium.launch({
        executablePath: CHROMIUM,
        headless: true,
        args: [
          '--no-sandbox',
          '--disable-gpu',
          '--disable-background-networking',
          '--disable-component-update',
          '--disable-sync',
          '--no-first-run',
        ],
      });
    }, 60_000);
    afterAll(async () => {
      await browser?.close();
    });

    it('renders both operations, init and verify, loading only from the service', async () => {
      const context = await browser.newContext();
      const page = await context.newPage();
      const requested: string[] = [];
      page.on('request', (r) => requested.push(r.url()));
      const errors: string[] = [];
      page.on('pageerror', (e) => errors.push(e.message));
      await page.goto(`${url}/docs`);
      const paths = page.locator('.opblock-summary-path');
      await paths.nth(1).waitFor({ timeout: 30_000 });
      const shown = await paths.allInnerTexts();
      expect(shown.map((t) => t.replace(/\u200b/g, '').trim())).toEqual(
        expect.arrayContaining(['/api/v1/attestation/init', '/api/v1/attestation/verify']),
      );
      expect(await page.locator('.opblock-summary-method').allInnerTexts()).toContain('POST');
      expect(errors).toEqual([]);
      expect(requested.length).toBeGreaterThan(3);
      for (const r of requested)
        expect(r.startsWith(`${url}/`) || r.startsWith('data:')).toBe(true);
      await context.close();
    }, 60_000);
  });
});
