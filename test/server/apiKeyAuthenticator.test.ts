import { afterEach, describe, expect, it, vi } from 'vitest';
import * as apiKeys from '../../src/core/apiKeys.js';
import { generateApiKey, hashApiKey } from '../../src/core/apiKeys.js';
import { addressPrefix } from '../../src/server/addressPrefix.js';
import { createApiKeyAuthenticator } from '../../src/server/apiKeyAuthenticator.js';
import type { ApiKeyLookup } from '../../src/server/apiKeyAuthTypes.js';

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
  origins?: string[];
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
    remembered: [] as string[],
    async rememberOrigin(id: string, prefix: string) {
      lookup.remembered.push(`${id} ${prefix}`);
    },
  } satisfies ApiKeyLookup & Record<string, unknown>;
  return lookup;
}

async function addKey(lookup: ReturnType<typeof fakeLookup>, options: Partial<Row> = {}) {
  const { id, key } = generateApiKey('attest');
  lookup.rows.set(id, {
    id,
    hash: await hashApiKey(key),
    expiresAt: null,
    revokedAt: null,
    ...options,
  });
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
  argon.mockImplementation((hash, presented) =>
    import('argon2').then((m) => m.default.verify(hash, presented)),
  );
});

describe('createApiKeyAuthenticator', () => {
  it('runs argon2 once per key, however many requests follow', async () => {
    const lookup = fakeLookup();
    const { id, key } = await addKey(lookup);
    const auth = createApiKeyAuthenticator({ lookup });
    argon.mockClear();
    for (let i = 0; i < 20; i++)
      expect(await auth.authenticate(key)).toEqual({ ok: true, keyId: id, mode: 'live' });
    expect(argon).toHaveBeenCalledTimes(1);
    expect(lookup.finds).toBe(1);
  });

  it('answers missing (401) and malformed (403) without a lookup or argon2', async () => {
    const lookup = fakeLookup();
    const auth = createApiKeyAuthenticator({ lookup });
    expect(await auth.authenticate(undefined)).toMatchObject({
      ok: false,
      status: 401,
      why: 'missing',
    });
    expect(await auth.authenticate('')).toMatchObject({ ok: false, status: 401, why: 'missing' });
    for (const bad of [
      'x',
      'attest_short',
      `Attest_${'a'.repeat(16)}${'A'.repeat(43)}`,
      `attest_${'a'.repeat(16)}${'A'.repeat(42)}`,
      `attest_${'a'.repeat(16)}${'A'.repeat(43)} `,
    ]) {
      expect(await auth.authenticate(bad)).toMatchObject({
        ok: false,
        status: 403,
        why: 'malformed',
      });
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
    for (let i = 0; i < 10; i++)
      expect(await auth.authenticate(wrong)).toMatchObject({
        ok: false,
        status: 403,
        why: 'mismatch',
      });
    expect(argon).toHaveBeenCalledTimes(1);
    now += 60_001;
    expect(await auth.authenticate(wrong)).toMatchObject({ ok: false, status: 403 });
    expect(argon).toHaveBeenCalledTimes(2);
    // the right key still works while its wrong twin is remembered
    expect(await auth.authenticate(key)).toMatchObject({ ok: true });
  });

  it('unknown, revoked and expired keys are refused from their row, without argon2, and are remembered', async () => {
    const lookup = fakeLookup();
    const revoked = await addKey(lookup, { revokedAt: new Date() });
    const expired = await addKey(lookup, { expiresAt: new Date(Date.now() - 1) });
    const unknown = generateApiKey('attest').key;
    const auth = createApiKeyAuthenticator({ lookup });
    argon.mockClear();
    expect(await auth.authenticate(revoked.key)).toMatchObject({
      status: 403,
      why: 'revoked',
      keyId: revoked.id,
    });
    expect(await auth.authenticate(expired.key)).toMatchObject({
      status: 403,
      why: 'expired',
      keyId: expired.id,
    });
    expect(await auth.authenticate(unknown)).toMatchObject({ status: 403, why: 'unknown' });
    // ids are 16 random characters: nobody guesses one, so only real keys are worth argon2
    expect(argon).not.toHaveBeenCalled();
    const finds = lookup.finds;
    // remembered, and the log of a repeated attempt still names the real cause
    expect(await auth.authenticate(revoked.key)).toMatchObject({ status: 403, why: 'revoked' });
    expect(await auth.authenticate(expired.key)).toMatchObject({ status: 403, why: 'expired' });
    expect(await auth.authenticate(unknown)).toMatchObject({ status: 403, why: 'unknown' });
    expect(lookup.finds).toBe(finds);
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
    expect(await auth.authenticate(a.key)).toMatchObject({
      ok: false,
      status: 403,
      why: 'revoked',
    });
    expect(await auth.authenticate(b.key)).toMatchObject({ ok: false, status: 403 });
    expect(await auth.authenticate(c.key)).toMatchObject({
      ok: false,
      status: 403,
      why: 'unknown',
    });
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
    const auth = createApiKeyAuthenticator({
      lookup,
      now: () => now,
      touchIntervalMs: 60_000,
      onTouchError: (e) => errors.push(e),
    });
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

/** `n` wrong secrets for `key`'s id, all distinct (a repeated one is answered from memory anyway) */
function wrongSecrets(key: string, n: number): string[] {
  const prefixAndId = key.slice(0, key.indexOf('_') + 17);
  return Array.from({ length: n }, () => prefixAndId + generateApiKey('attest').key.slice(-43));
}

describe('failure limiter', () => {
  it('after maxFailuresPerId wrong secrets for an id, further ones are refused without argon2 (the row is read once per revalidateMs)', async () => {
    const lookup = fakeLookup();
    const { id, key } = await addKey(lookup);
    const auth = createApiKeyAuthenticator({ lookup, now: () => 0, maxFailuresPerId: 5 });
    argon.mockClear();
    const results = [];
    for (const wrong of wrongSecrets(key, 40))
      results.push(await auth.authenticate(wrong, { address: `10.0.0.${results.length}` }));
    expect(results.slice(0, 5).every((r) => !r.ok && r.why === 'mismatch')).toBe(true);
    for (const r of results.slice(5))
      expect(r).toEqual({ ok: false, status: 403, why: 'locked_id', keyId: id });
    expect(argon).toHaveBeenCalledTimes(5);
    expect(lookup.finds).toBe(1);
  });

  it('a burst counts while it is still hashing: at most maxFailuresPerId argon2 runs', async () => {
    const lookup = fakeLookup();
    const { key } = await addKey(lookup);
    const auth = createApiKeyAuthenticator({ lookup, now: () => 0, maxFailuresPerId: 5 });
    argon.mockClear();
    const release = slowArgon();
    const pending = wrongSecrets(key, 50).map((wrong) => auth.authenticate(wrong));
    release();
    const results = await Promise.all(pending);
    expect(argon).toHaveBeenCalledTimes(5);
    expect(results.filter((r) => !r.ok && r.why === 'locked_id')).toHaveLength(45);
  });

  it('a spray of unknown ids runs no argon2, so it cannot fill the queue for a real key', async () => {
    const lookup = fakeLookup();
    const good = await addKey(lookup);
    const auth = createApiKeyAuthenticator({ lookup, maxConcurrentHashes: 1, maxQueuedHashes: 1 });
    argon.mockClear();
    const release = slowArgon();
    const spray = Array.from({ length: 50 }, (_, i) =>
      auth.authenticate(generateApiKey('attest').key, { address: `10.9.${i}.1` }),
    );
    const real = auth.authenticate(good.key, { address: '198.51.100.1' });
    expect((await Promise.all(spray)).every((r) => !r.ok && r.why === 'unknown')).toBe(true);
    release();
    expect(await real).toMatchObject({ ok: true });
    expect(argon).toHaveBeenCalledTimes(1);
  });

  it('a verified key keeps working while its id is flooded (the cache comes before the limiter)', async () => {
    const lookup = fakeLookup();
    const { id, key } = await addKey(lookup);
    const auth = createApiKeyAuthenticator({ lookup, maxFailuresPerId: 3 });
    expect(await auth.authenticate(key, { address: '10.0.0.1' })).toEqual({
      ok: true,
      keyId: id,
      mode: 'live',
    });
    for (const wrong of wrongSecrets(key, 20))
      await auth.authenticate(wrong, { address: '10.0.0.1' });
    argon.mockClear();
    expect(await auth.authenticate(key, { address: '10.0.0.1' })).toEqual({
      ok: true,
      keyId: id,
      mode: 'live',
    });
    expect(argon).not.toHaveBeenCalled();
  });

  it('while an id is locked, its right key gets in through a probe from an address that has not failed; a failing address gets none', async () => {
    let now = 1_000_000;
    const lookup = fakeLookup();
    const { id, key } = await addKey(lookup);
    const auth = createApiKeyAuthenticator({
      lookup,
      now: () => now,
      maxFailuresPerId: 3,
      maxFailuresPerAddress: 1000,
      lockedProbeMs: 1000,
    });
    for (const wrong of wrongSecrets(key, 10))
      await auth.authenticate(wrong, { address: '192.0.2.66' });
    // the attacker's own address never gets a probe, however long it waits
    now += 5000;
    expect(
      await auth.authenticate(wrongSecrets(key, 1)[0], { address: '192.0.2.66' }),
    ).toMatchObject({ why: 'locked_id' });
    expect(await auth.authenticate(key, { address: '192.0.2.66' })).toMatchObject({
      ok: false,
      why: 'locked_id',
    });
    // a clean address gets one verification per lockedProbeMs
    expect(await auth.authenticate(key, { address: '198.51.100.7' })).toEqual({
      ok: true,
      keyId: id,
      mode: 'live',
    });
    const other = wrongSecrets(key, 2);
    expect(await auth.authenticate(other[0], { address: '198.51.100.8' })).toMatchObject({
      why: 'locked_id',
    });
    now += 999;
    expect(await auth.authenticate(other[1], { address: '198.51.100.9' })).toMatchObject({
      why: 'locked_id',
    });
    now += 1;
    expect(await auth.authenticate(other[1], { address: '198.51.100.9' })).toMatchObject({
      why: 'mismatch',
    });
  });

  it('after maxFailuresPerAddress failures from one address, it is refused for any id; other addresses are not', async () => {
    const lookup = fakeLookup();
    const good = await addKey(lookup);
    const others = await Promise.all(Array.from({ length: 8 }, () => addKey(lookup)));
    const auth = createApiKeyAuthenticator({ lookup, maxFailuresPerAddress: 4 });
    argon.mockClear();
    const whys = [];
    for (const other of others)
      whys.push(
        (await auth.authenticate(wrongSecrets(other.key, 1)[0]!, { address: '203.0.113.5' })) as {
          why: string;
        },
      );
    expect(whys.map((r) => r.why)).toEqual([
      'mismatch',
      'mismatch',
      'mismatch',
      'mismatch',
      'locked_address',
      'locked_address',
      'locked_address',
      'locked_address',
    ]);
    expect(argon).toHaveBeenCalledTimes(4);
    expect(await auth.authenticate(good.key, { address: '203.0.113.5' })).toMatchObject({
      ok: false,
      why: 'locked_address',
    });
    expect(await auth.authenticate(good.key, { address: '203.0.113.6' })).toMatchObject({
      ok: true,
    });
    // and once verified, the key passes from the locked address too (cache first)
    expect(await auth.authenticate(good.key, { address: '203.0.113.5' })).toMatchObject({
      ok: true,
    });
  });

  it('an IPv6 client is its /64: rotating addresses inside it share one budget', async () => {
    const lookup = fakeLookup();
    const others = await Promise.all(Array.from({ length: 6 }, () => addKey(lookup)));
    const auth = createApiKeyAuthenticator({ lookup, maxFailuresPerAddress: 3 });
    const whys = [];
    for (const [i, other] of others.entries())
      whys.push(
        (
          (await auth.authenticate(wrongSecrets(other.key, 1)[0]!, {
            address: `2001:db8:aa:bb:${i}::${i + 1}`,
          })) as { why: string }
        ).why,
      );
    expect(whys).toEqual([
      'mismatch',
      'mismatch',
      'mismatch',
      'locked_address',
      'locked_address',
      'locked_address',
    ]);
  });

  it('successes do not count: a busy team of good keys from one address is never locked', async () => {
    const lookup = fakeLookup();
    const keys = await Promise.all(Array.from({ length: 6 }, () => addKey(lookup)));
    const auth = createApiKeyAuthenticator({ lookup, maxFailuresPerAddress: 2 });
    for (const k of keys)
      expect(await auth.authenticate(k.key, { address: '10.1.1.1' })).toMatchObject({ ok: true });
  });

  it('the window passes: hashing resumes after failureWindowMs', async () => {
    let now = 0;
    const lookup = fakeLookup();
    const { key } = await addKey(lookup);
    const auth = createApiKeyAuthenticator({
      lookup,
      now: () => now,
      maxFailuresPerId: 2,
      failureWindowMs: 60_000,
    });
    const wrong = wrongSecrets(key, 4);
    expect(await auth.authenticate(wrong[0])).toMatchObject({ why: 'mismatch' });
    expect(await auth.authenticate(wrong[1])).toMatchObject({ why: 'mismatch' });
    now = 999;
    expect(await auth.authenticate(wrong[2])).toMatchObject({ why: 'locked_id' });
    now = 59_999;
    const during = await auth.authenticate(wrong[2]);
    expect(during).toMatchObject({ why: 'mismatch' }); // that was the probe
    expect(await auth.authenticate(wrong[3])).toMatchObject({ why: 'locked_id' });
    now = 60_000 + 59_999;
    expect(await auth.authenticate(wrong[3])).toMatchObject({ why: 'mismatch' });
  });

  it('a lookup that fails does not count as a failure', async () => {
    const lookup = fakeLookup();
    const { key } = await addKey(lookup);
    const auth = createApiKeyAuthenticator({ lookup, maxFailuresPerId: 2 });
    const find = lookup.find;
    lookup.find = async () => {
      throw new Error('connection refused');
    };
    for (const wrong of wrongSecrets(key, 5))
      await expect(auth.authenticate(wrong)).rejects.toThrow('connection refused');
    lookup.find = find;
    expect(await auth.authenticate(key)).toMatchObject({ ok: true });
  });

  it('database reads go through the request budget; argon2 does not', async () => {
    const lookup = fakeLookup();
    const { key } = await addKey(lookup);
    const auth = createApiKeyAuthenticator({ lookup });
    const budgeted: unknown[] = [];
    const release = slowArgon();
    const result = auth.authenticate(key, {
      backend: (work) => {
        budgeted.push(work);
        return typeof work === 'function' ? work() : work;
      },
    });
    await new Promise((r) => setTimeout(r, 20));
    expect(budgeted).toHaveLength(1); // the row read, already done; argon2 still waits, unbudgeted
    release();
    expect(await result).toMatchObject({ ok: true });
    expect(budgeted).toHaveLength(1);
  });

  it('keeps its failure windows bounded (LRU)', async () => {
    const lookup = fakeLookup();
    const auth = createApiKeyAuthenticator({
      lookup,
      now: () => 0,
      maxEntries: 10,
      maxFailuresPerId: 1,
    });
    const first = (await addKey(lookup)).key;
    await auth.authenticate(wrongSecrets(first, 1)[0]!);
    expect(await auth.authenticate(wrongSecrets(first, 1)[0]!)).toMatchObject({
      why: 'locked_id',
    });
    for (let i = 0; i < 11; i++)
      await auth.authenticate(wrongSecrets((await addKey(lookup)).key, 1)[0]!);
    // the first id's window fell out: it is hashed again (memory stays bounded under id spraying)
    expect(await auth.authenticate(wrongSecrets(first, 1)[0]!)).toMatchObject({ why: 'mismatch' });
  });
});

describe('addressPrefix', () => {
  it('keeps an IPv4 address whole and groups IPv6 by /64', () => {
    expect(addressPrefix('192.0.2.7')).toBe('192.0.2.7');
    expect(addressPrefix('::ffff:192.0.2.7')).toBe('192.0.2.7');
    expect(addressPrefix('2001:db8:1:2:3:4:5:6')).toBe('2001:db8:1:2::/64');
    expect(addressPrefix('2001:0DB8:0001:0002::9')).toBe('2001:db8:1:2::/64');
    expect(addressPrefix('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(addressPrefix('2001:db8:1:2::1.2.3.4')).toBe('2001:db8:1:2::/64');
    expect(addressPrefix('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
    expect(addressPrefix('::1')).toBe('0:0:0:0::/64');
    expect(addressPrefix(undefined)).toBeUndefined();
  });
});

describe("a key's origins (address prefixes that authenticated it recently)", () => {
  it('an attacker who knows the id and owns many addresses cannot lock the owner out of a fresh instance', async () => {
    const lookup = fakeLookup();
    const { id, key } = await addKey(lookup, { origins: ['192.0.2.10', '2001:db8:7:7::/64'] });
    // a fresh instance: nothing cached, and the clock never moves (no probe ever comes due)
    const auth = createApiKeyAuthenticator({ lookup, now: () => 0, maxFailuresPerId: 5 });
    const flood = wrongSecrets(key, 60);
    for (const [i, wrong] of flood.entries())
      await auth.authenticate(wrong, { address: `10.${i >> 8}.${i & 255}.1` });
    expect(
      await auth.authenticate(wrongSecrets(key, 1)[0]!, { address: '10.200.0.1' }),
    ).toMatchObject({ why: 'locked_id' });
    expect(await auth.authenticate(key, { address: '192.0.2.10' })).toEqual({
      ok: true,
      keyId: id,
      mode: 'live',
    });
    // another address of the owner's IPv6 /64 too (a second key value, not cached)
    const second = createApiKeyAuthenticator({ lookup, now: () => 0, maxFailuresPerId: 5 });
    for (const [i, wrong] of flood.entries())
      await second.authenticate(wrong, { address: `10.${i >> 8}.${i & 255}.1` });
    expect(await second.authenticate(key, { address: '2001:db8:7:7::42' })).toMatchObject({
      ok: true,
    });
  });

  it("an origin's wrong secrets spend its own budget, not the id's", async () => {
    const lookup = fakeLookup();
    const { key } = await addKey(lookup, { origins: ['192.0.2.10'] });
    const auth = createApiKeyAuthenticator({
      lookup,
      now: () => 0,
      maxFailuresPerId: 5,
      maxFailuresPerOrigin: 2,
    });
    const wrong = wrongSecrets(key, 4);
    const whys = [];
    for (const w of wrong)
      whys.push(((await auth.authenticate(w, { address: '192.0.2.10' })) as { why: string }).why);
    expect(whys).toEqual(['mismatch', 'mismatch', 'locked_origin', 'locked_origin']);
    // other addresses still have the id's whole budget
    expect(
      await auth.authenticate(wrongSecrets(key, 1)[0]!, { address: '10.0.0.1' }),
    ).toMatchObject({ why: 'mismatch' });
  });

  it("the owner's first request is hashed ahead of a full queue of strangers' (no 503)", async () => {
    const lookup = fakeLookup();
    const owner = await addKey(lookup, { origins: ['192.0.2.10'] });
    const strangers = await Promise.all(Array.from({ length: 20 }, () => addKey(lookup)));
    const auth = createApiKeyAuthenticator({ lookup, maxConcurrentHashes: 1, maxQueuedHashes: 4 });
    argon.mockClear();
    const release = slowArgon();
    const flood = strangers.map((s, i) =>
      auth.authenticate(wrongSecrets(s.key, 1)[0]!, { address: `10.1.${i}.1` }),
    );
    const mine = auth.authenticate(owner.key, { address: '192.0.2.10' });
    await vi.waitFor(() => expect(argon).toHaveBeenCalledTimes(1));
    release();
    expect(await mine).toMatchObject({ ok: true });
    // the owner came second: after the one already running, before every waiting stranger
    expect(argon.mock.calls[1]![1]).toBe(owner.key);
    const results = await Promise.all(flood);
    expect(results.filter((r) => !r.ok && r.why === 'busy').length).toBeGreaterThan(0);
  });

  it('one address prefix waits for at most maxQueuedHashesPerPrefix hashes: it cannot fill the queue alone', async () => {
    const lookup = fakeLookup();
    const keys = await Promise.all(Array.from({ length: 10 }, () => addKey(lookup)));
    const newcomer = await addKey(lookup);
    const auth = createApiKeyAuthenticator({
      lookup,
      maxConcurrentHashes: 1,
      maxQueuedHashes: 8,
      maxQueuedHashesPerPrefix: 2,
    });
    const release = slowArgon();
    const flood = keys.map((k) =>
      auth.authenticate(wrongSecrets(k.key, 1)[0]!, { address: '10.5.5.5' }),
    );
    const mine = auth.authenticate(newcomer.key, { address: '198.51.100.77' });
    release();
    const results = await Promise.all(flood);
    expect(results.filter((r) => !r.ok && r.why === 'busy')).toHaveLength(7); // 1 ran, 2 waited
    expect(await mine).toMatchObject({ ok: true });
  });

  it('a cached row remembers its maxOriginsPerKey most recent origins, not every prefix ever seen', async () => {
    const lookup = fakeLookup();
    const { key } = await addKey(lookup);
    const auth = createApiKeyAuthenticator({
      lookup,
      now: () => 0,
      maxOriginsPerKey: 2,
      maxFailuresPerOrigin: 1,
    });
    for (const address of ['192.0.2.1', '192.0.2.2', '192.0.2.3'])
      expect(await auth.authenticate(key, { address })).toMatchObject({ ok: true });
    const whys = async (address: string) => {
      const out = [];
      for (const w of wrongSecrets(key, 2))
        out.push(((await auth.authenticate(w, { address })) as { why: string }).why);
      return out;
    };
    // the newest origin spends its own budget; the oldest was forgotten: it is a stranger again
    expect(await whys('192.0.2.3')).toEqual(['mismatch', 'locked_origin']);
    expect(await whys('192.0.2.1')).toEqual(['mismatch', 'mismatch']);
  });

  it('a success records its address prefix as an origin, at most once per touchInterval', async () => {
    let now = 0;
    const lookup = fakeLookup();
    const { id, key } = await addKey(lookup);
    const auth = createApiKeyAuthenticator({ lookup, now: () => now, touchIntervalMs: 60_000 });
    await auth.authenticate(key, { address: '2001:db8:1:2::5' });
    await auth.authenticate(key, { address: '2001:db8:1:2::6' });
    await auth.authenticate(key, { address: '192.0.2.1' });
    expect(lookup.remembered).toEqual([`${id} 2001:db8:1:2::/64`, `${id} 192.0.2.1`]);
    now = 60_000;
    await auth.authenticate(key, { address: '192.0.2.1' });
    expect(lookup.remembered).toHaveLength(3);
  });
});
