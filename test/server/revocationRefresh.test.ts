// The Android attestation status list: stored once for every instance (newer wins), refreshed by
// serve from a URL (a local fake of Google's here), its age a metric and a warning past 7 days.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { shippedRevocations } from '../../src/core/androidKey/revocationList.js';
import {
  createRevocationRepository,
  createRevocationSource,
} from '../../src/db/androidRevocations.js';
import { createMetrics } from '../../src/server/metrics.js';
import {
  checkRevocationAge,
  refreshRevocations,
  startRevocationRefresh,
} from '../../src/server/revocationRefresh.js';
import { backends, useDatabase } from '../support/databases.js';

let server: Server | undefined;
afterEach(async () => {
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
});

/** A local stand-in for android.googleapis.com/attestation/status; counts its requests. */
async function fakeGoogle(body: () => { status: number; text: string }) {
  let requests = 0;
  server = createServer((_req, res) => {
    requests++;
    const { status, text } = body();
    res.writeHead(status, { 'Content-Type': 'application/json' });
    res.end(text);
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/attestation/status`, requests: () => requests };
}

/** `n` well-formed entries, as Google's list has them (hex serial numbers). */
function plausibleEntries(n: number) {
  const entries: Record<string, { status: string; reason: string }> = {};
  for (let i = 1; i <= n; i++)
    entries[i.toString(16)] = { status: 'REVOKED', reason: 'KEY_COMPROMISE' };
  return entries;
}

describe.each(backends())('the Android status list on $name', (backend) => {
  const db = useDatabase(backend);

  it('is seeded from the shipped snapshot, and read from the database after', async () => {
    const repo = createRevocationRepository(db.db);
    const source = createRevocationSource(repo, { ttlMs: 0 });
    expect((await source.list()).size).toBe(shippedRevocations().list.size); // nothing stored yet
    await repo.seed();
    await repo.seed(); // once only
    expect(await repo.info()).toMatchObject({ source: 'snapshot 2026-04-08', entryCount: 1650 });
    await repo.replace(new Map([[0x10n, { status: 'REVOKED' }]]), 'test', new Date());
    const list = await source.list();
    expect(list.size).toBe(1);
    expect(list.lookup(0x10n)).toEqual({ status: 'REVOKED' });
  });

  it('a list older than the stored one is never put back', async () => {
    const repo = createRevocationRepository(db.db);
    expect(await repo.replace(new Map(), 'new', new Date('2026-11-01'))).toBe(true);
    expect(
      await repo.replace(new Map([[1n, { status: 'REVOKED' }]]), 'old', new Date('2026-10-01')),
    ).toBe(false);
    expect((await repo.info())!.source).toBe('new');
  });

  it('refreshes from the URL; a bad answer keeps the stored list', async () => {
    const repo = createRevocationRepository(db.db);
    await repo.seed();
    let answer = { status: 200, text: JSON.stringify({ entries: plausibleEntries(1700) }) };
    const google = await fakeGoogle(() => answer);
    expect(await refreshRevocations({ url: google.url, repo })).toEqual({
      entries: 1700,
      stored: true,
    });
    expect((await repo.info())!.source).toBe(google.url);
    for (const bad of [
      { status: 503, text: 'unavailable' },
      { status: 200, text: 'not json' },
      { status: 200, text: JSON.stringify({ entries: { 'not-hex': { status: 'REVOKED' } } }) },
    ]) {
      answer = bad;
      await expect(refreshRevocations({ url: google.url, repo })).rejects.toThrow();
    }
    expect((await repo.info())!.entryCount).toBe(1700);
  });

  it('an empty list, or one with fewer than half the stored entries, is refused', async () => {
    const repo = createRevocationRepository(db.db);
    await repo.seed(); // 1650 entries
    let answer = { status: 200, text: JSON.stringify({ entries: {} }) };
    const google = await fakeGoogle(() => answer);
    await expect(refreshRevocations({ url: google.url, repo })).rejects.toThrow(
      /sent an empty list: the stored one is kept/,
    );
    answer = { status: 200, text: JSON.stringify({ entries: plausibleEntries(800) }) };
    await expect(refreshRevocations({ url: google.url, repo })).rejects.toThrow(
      /sent 800 entries, fewer than half of the 1650 stored/,
    );
    expect(await repo.info()).toMatchObject({ source: 'snapshot 2026-04-08', entryCount: 1650 });
  });

  it('a redirect is not followed', async () => {
    const repo = createRevocationRepository(db.db);
    await repo.seed();
    let elsewhere = 0;
    const other = createServer((_req, res) => {
      elsewhere++;
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ entries: plausibleEntries(1700) }));
    });
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = other.address() as AddressInfo;
      server = createServer((_req, res) => {
        res.writeHead(302, { Location: `http://127.0.0.1:${port}/status` });
        res.end();
      });
      await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/attestation/status`;
      await expect(refreshRevocations({ url, repo })).rejects.toThrow(/could not be fetched/);
      expect(elsewhere).toBe(0);
      expect((await repo.info())!.entryCount).toBe(1650);
    } finally {
      other.closeAllConnections();
      await new Promise<void>((resolve) => other.close(() => resolve()));
    }
  });

  it('an endless answer is cut at 16 MiB while it streams', async () => {
    const repo = createRevocationRepository(db.db);
    await repo.seed();
    const cap = 64 * 1024 * 1024;
    let sent = 0;
    let closed!: () => void;
    const done = new Promise<void>((resolve) => (closed = resolve));
    server = createServer((_req, res) => {
      res.on('close', closed);
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.write('{"entries":{');
      const chunk = Buffer.alloc(65536, 0x20);
      const pump = () => {
        while (sent < cap && !res.destroyed) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end('}}');
      };
      pump();
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/attestation/status`;
    await expect(refreshRevocations({ url, repo })).rejects.toThrow(
      /sent more than 16777216 bytes/,
    );
    await done;
    // reading the whole answer first would have taken all 64 MB
    expect(sent).toBeLessThan(32 * 1024 * 1024);
    expect((await repo.info())!.entryCount).toBe(1650);
  });

  it('runs on a schedule; warns while the list is older than 7 days; stop ends it', async () => {
    const repo = createRevocationRepository(db.db);
    await repo.seed();
    const google = await fakeGoogle(() => ({ status: 500, text: '' }));
    const errors: Error[] = [];
    const stale: number[] = [];
    let resolveStale!: () => void;
    const staleSeen = new Promise<void>((r) => (resolveStale = r));
    const refresher = startRevocationRefresh({
      url: google.url,
      intervalMs: 60_000,
      repo,
      now: () => new Date('2026-11-25T00:00:00Z'),
      onError: (err) => errors.push(err),
      onStale: (info) => {
        stale.push(info.ageDays);
        resolveStale();
      },
    });
    await staleSeen;
    await refresher.stop();
    expect(google.requests()).toBe(1);
    expect(errors[0]!.message).toMatch(/HTTP 500/);
    expect(stale).toEqual([231]); // the 2026-04-08 snapshot, seen on 2026-11-25
    // the failure is stored for `attest status`, not only logged
    expect((await repo.info())!.lastRefreshError).toEqual({
      message: expect.stringMatching(/HTTP 500/),
      at: expect.any(Date),
    });
    const fresh: number[] = [];
    await repo.replace(new Map(), 'fresh', new Date('2026-11-24T00:00:00Z'));
    await checkRevocationAge(repo, new Date('2026-11-25T00:00:00Z'), (i) => fresh.push(i.ageDays));
    expect(fresh).toEqual([]);
  });

  it('a refresh that succeeds clears the stored refresh error', async () => {
    const repo = createRevocationRepository(db.db);
    await repo.seed();
    await repo.recordRefresh('earlier failure');
    expect((await repo.info())!.lastRefreshError?.message).toBe('earlier failure');
    const google = await fakeGoogle(() => ({
      status: 200,
      text: JSON.stringify({ entries: plausibleEntries(1700) }),
    }));
    let resolveDone!: () => void;
    const done = new Promise<void>((r) => (resolveDone = r));
    const refresher = startRevocationRefresh({
      url: google.url,
      intervalMs: 60_000,
      // told when the refresh's outcome is recorded
      repo: {
        ...repo,
        recordRefresh: async (error) => {
          await repo.recordRefresh(error);
          resolveDone();
        },
      },
    });
    await done;
    await refresher.stop();
    expect((await repo.info())!.lastRefreshError).toBeNull();
  });

  it('/metrics shows the age of the list in use', async () => {
    const repo = createRevocationRepository(db.db);
    await repo.replace(new Map(), 'x', new Date('2026-11-24T00:00:00Z'));
    const source = createRevocationSource(repo, { ttlMs: 0 });
    await source.list();
    const metrics = createMetrics({
      now: () => Date.parse('2026-11-25T00:00:00Z'),
      androidRevocationTakenAt: () => source.info()?.takenAt ?? null,
    });
    expect(await metrics.registry.metrics()).toMatch(/attest_android_revocation_age_seconds 86400/);
  });
});
