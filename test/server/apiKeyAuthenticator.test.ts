import { afterEach, describe, expect, it, vi } from 'vitest';
import * as apiKeys from '../../src/core/apiKeys.js';
import { generateApiKey, hashApiKey } from '../../src/core/apiKeys.js';
import { createApiKeyAuthenticator, type ApiKeyLookup } from '../../src/server/apiKeyAuthenticator.js';

vi.mock('../../src/core/apiKeys.js', async (importOriginal) => {
  const actual = await importOriginal<typeof import('../../src/core/apiKeys.js')>();
  return { ...actual, verifyApiKeyHash: vi.fn(actual.verifyApiKeyHash) };
});
const argon = vi.mocked(apiKeys.verifyApiKeyHash);

interface Row {
  id: string;
  hash: string;
  expiresAt: Date | null;
  revokedAt: Date | null;
}

/** An in-memory key table that counts reads and can be made slow. */
function fakeLookup() {
  const rows = new Map<string, Row>();
  const lookup = {
    rows,
    finds: 0,
    touches: [] as string[],
    gate: null as Promise<void> | null,
    async find(id: string) {
      lookup.finds++;
      if (lookup.gate) await lookup.gate;
      const r = rows.get(id);
      return r ? { ...r } : null;
    },
    async touch(id: string) {
      lookup.touches.push(id);
    },
  } satisfies ApiKeyLookup & Record<string, unknown>;
  return lookup;
}

async function addKey(lookup: ReturnType<typeof fakeLookup>, options: Partial<Row> = {}) {
  const { id, key } = generateApiKey('attest');
  lookup.rows.set(id, { id, hash: await hashApiKey(key), expiresAt: null, revokedAt: null, ...options });
  return { id, key };
}

/** a fake argon2 that waits for `release` */
function slowArgon() {
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  argon.mockImplementation(async (hash, presented) => {
    await released;
    return (await import('argon2')).default.verify(hash, presented);
  });
  return release;
}

afterEach(() => {
  argon.mockClear();
  argon.mockImplementation((hash, presented) => import('argon2').then((m) => m.default.verify(hash, presented)));
});

describe('createApiKeyAuthenticator', () => {
  it('runs argon2 once per key, however many requests follow', async () => {
    const lookup = fakeLookup();
    const { id, key } = await addKey(lookup);
    const auth = createApiKeyAuthenticator({ lookup });
    argon.mockClear();
    for (let i = 0; i < 20; i++) expect(await auth.authenticate(key)).toEqual({ ok: true, keyId: id, mode: 'live' });
    expect(argon).toHaveBeenCalledTimes(1);
    expect(lookup.finds).toBe(1);
  });

  it('answers missing (401) and malformed (403) without a lookup or argon2', async () => {
    const lookup = fakeLookup();
    const auth = createApiKeyAuthenticator({ lookup });
    expect(await auth.authenticate(undefined)).toMatchObject({ ok: false, status: 401, why: 'missing' });
    expect(await auth.authenticate('')).toMatchObject({ ok: false, status: 401, why: 'missing' });
    for (const bad of ['x', 'attest_short', `Attest_${'a'.repeat(16)}${'A'.repeat(43)}`, `attest_${'a'.repeat(16)}${'A'.repeat(42)}`, `attest_${'a'.repeat(16)}${'A'.repeat(43)} `]) {
      expect(await auth.authenticate(bad)).toMatchObject({ ok: false, status: 403, why: 'malformed' });
    }
    expect(lookup.finds).toBe(0);
    expect(argon).not.toHaveBeenCalled();
  });

  it('remembers a wrong secret: argon2 is not run again for the same value within the failure ttl', async () => {
    let now = 1_000_000;
    const lookup = fakeLookup();
    const { key } = await addKey(lookup);
    const wrong = key.slice(0, -1) + (key.endsWith('A') ? 'B' : 'A');
    const auth = createApiKeyAuthenticator({ lookup, now: () => now, failureTtlMs: 60_000 });
    argon.mockClear();
    for (let i = 0; i < 10; i++) expect(await auth.authenticate(wrong)).toMatchObject({ ok: false, status: 403, why: 'mismatch' });
    expect(argon).toHaveBeenCalledTimes(1);
    now += 60_001;
    expect(await auth.authenticate(wrong)).toMatchObject({ ok: false, status: 403 });
    expect(argon).toHaveBeenCalledTimes(2);
    // the right key still works while its wrong twin is remembered
    expect(await auth.authenticate(key)).toMatchObject({ ok: true });
  });

  it('unknown, revoked and expired keys are 403 without argon2 and remembered', async () => {
    const lookup = fakeLookup();
    const revoked = await addKey(lookup, { revokedAt: new Date() });
    const expired = await addKey(lookup, { expiresAt: new Date(Date.now() - 1) });
    const unknown = generateApiKey('attest').key;
    const auth = createApiKeyAuthenticator({ lookup });
    argon.mockClear();
    expect(await auth.authenticate(revoked.key)).toMatchObject({ status: 403, why: 'revoked', keyId: revoked.id });
    expect(await auth.authenticate(expired.key)).toMatchObject({ status: 403, why: 'expired', keyId: expired.id });
    expect(await auth.authenticate(unknown)).toMatchObject({ status: 403, why: 'unknown' });
    const finds = lookup.finds;
    // remembered, and the log of a repeated attempt still names the real cause
    expect(await auth.authenticate(revoked.key)).toMatchObject({ status: 403, why: 'revoked' });
    expect(await auth.authenticate(expired.key)).toMatchObject({ status: 403, why: 'expired' });
    expect(await auth.authenticate(unknown)).toMatchObject({ status: 403, why: 'unknown' });
    expect(lookup.finds).toBe(finds);
    expect(argon).not.toHaveBeenCalled();
  });

  it('re-reads a verified key every revalidateMs and drops it once revoked, replaced or deleted', async () => {
    let now = 0;
    const lookup = fakeLookup();
    const a = await addKey(lookup);
    const b = await addKey(lookup);
    const c = await addKey(lookup);
    const auth = createApiKeyAuthenticator({ lookup, now: () => now, revalidateMs: 5000 });
    for (const k of [a, b, c]) expect(await auth.authenticate(k.key)).toMatchObject({ ok: true });
    lookup.rows.get(a.id)!.revokedAt = new Date();
    lookup.rows.get(b.id)!.hash = await hashApiKey('attest_other');
    lookup.rows.delete(c.id);
    now = 4999;
    for (const k of [a, b, c]) expect(await auth.authenticate(k.key)).toMatchObject({ ok: true });
    now = 5000;
    expect(await auth.authenticate(a.key)).toMatchObject({ ok: false, status: 403, why: 'revoked' });
    expect(await auth.authenticate(b.key)).toMatchObject({ ok: false, status: 403 });
    expect(await auth.authenticate(c.key)).toMatchObject({ ok: false, status: 403, why: 'unknown' });
    // and they stay out
    now = 5001;
    expect(await auth.authenticate(a.key)).toMatchObject({ ok: false, status: 403 });
  });

  it('invalidate() drops a key at once in the revoking process', async () => {
    const lookup = fakeLookup();
    const a = await addKey(lookup);
    const auth = createApiKeyAuthenticator({ lookup });
    expect(await auth.authenticate(a.key)).toMatchObject({ ok: true });
    lookup.rows.get(a.id)!.revokedAt = new Date();
    auth.invalidate(a.id);
    expect(await auth.authenticate(a.key)).toMatchObject({ ok: false, why: 'revoked' });
  });

  it('concurrent first requests with one key share one lookup and one argon2 run', async () => {
    const lookup = fakeLookup();
    const { id, key } = await addKey(lookup);
    const auth = createApiKeyAuthenticator({ lookup });
    argon.mockClear();
    const release = slowArgon();
    const pending = Array.from({ length: 50 }, () => auth.authenticate(key));
    await new Promise((r) => setTimeout(r, 20));
    release();
    const results = await Promise.all(pending);
    expect(results.every((r) => r.ok && r.keyId === id)).toBe(true);
    expect(argon).toHaveBeenCalledTimes(1);
    expect(lookup.finds).toBe(1);
  });

  it('bounds argon2: at most maxConcurrentHashes run, maxQueuedHashes wait, the rest are 503 busy', async () => {
    const lookup = fakeLookup();
    const keys = await Promise.all(Array.from({ length: 8 }, () => addKey(lookup)));
    const auth = createApiKeyAuthenticator({ lookup, maxConcurrentHashes: 2, maxQueuedHashes: 3 });
    const release = slowArgon();
    argon.mockClear();
    const pending = keys.map((k) => auth.authenticate(k.key));
    await new Promise((r) => setTimeout(r, 30));
    expect(argon).toHaveBeenCalledTimes(2); // two running, three queued, three refused
    release();
    const results = await Promise.all(pending);
    expect(results.filter((r) => r.ok)).toHaveLength(5);
    const busy = results.filter((r) => !r.ok);
    expect(busy).toHaveLength(3);
    for (const r of busy) expect(r).toMatchObject({ status: 503, why: 'busy' });
    expect(argon).toHaveBeenCalledTimes(5);
    // busy is not remembered as a failure: the same key is tried again
    const refused = keys[results.findIndex((r) => !r.ok)]!;
    expect(await auth.authenticate(refused.key)).toMatchObject({ ok: true });
  });

  it('keys already verified are never delayed by a full argon2 queue', async () => {
    const lookup = fakeLookup();
    const known = await addKey(lookup);
    const strangers = await Promise.all(Array.from({ length: 4 }, () => addKey(lookup)));
    const auth = createApiKeyAuthenticator({ lookup, maxConcurrentHashes: 1, maxQueuedHashes: 1 });
    expect(await auth.authenticate(known.key)).toMatchObject({ ok: true });
    const release = slowArgon();
    const pending = strangers.map((k) => auth.authenticate(k.key));
    await new Promise((r) => setTimeout(r, 20));
    const started = performance.now();
    expect(await auth.authenticate(known.key)).toMatchObject({ ok: true });
    expect(performance.now() - started).toBeLessThan(1000); // argon2 is blocked until release(): any bound proves it
    release();
    await Promise.all(pending);
  });

  it('a lookup that fails is a fault (thrown), not a 403, and is not remembered', async () => {
    const lookup = fakeLookup();
    const { key } = await addKey(lookup);
    const auth = createApiKeyAuthenticator({ lookup });
    const find = lookup.find;
    lookup.find = async () => {
      throw new Error('connection refused');
    };
    await expect(auth.authenticate(key)).rejects.toThrow('connection refused');
    lookup.find = find;
    expect(await auth.authenticate(key)).toMatchObject({ ok: true });
  });

  it('records use at most once per touchInterval and survives a failing touch', async () => {
    let now = 1_700_000_000_000;
    const lookup = fakeLookup();
    const { id, key } = await addKey(lookup);
    const errors: unknown[] = [];
    const auth = createApiKeyAuthenticator({ lookup, now: () => now, touchIntervalMs: 60_000, onTouchError: (e) => errors.push(e) });
    for (let i = 0; i < 5; i++) await auth.authenticate(key);
    expect(lookup.touches).toEqual([id]);
    now += 60_000;
    lookup.touch = async () => {
      throw new Error('nope');
    };
    expect(await auth.authenticate(key)).toMatchObject({ ok: true });
    await new Promise((r) => setTimeout(r, 5));
    expect(errors).toHaveLength(1);
  });

  it('keeps its caches bounded', async () => {
    const lookup = fakeLookup();
    const auth = createApiKeyAuthenticator({ lookup, maxEntries: 10 });
    const keys = Array.from({ length: 11 }, () => generateApiKey('attest').key);
    for (const k of keys) await auth.authenticate(k);
    expect(lookup.finds).toBe(11);
    await auth.authenticate(keys[10]!); // still remembered
    expect(lookup.finds).toBe(11);
    await auth.authenticate(keys[0]!); // the oldest fell out: looked up again
    expect(lookup.finds).toBe(12);
  });
});
