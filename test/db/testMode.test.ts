// The test-mode columns and tables on both backends: key modes, App Attest key origin, test-only
// Play pairs (one per package, even when first mints race) and the development CA row.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestPlayKeys } from '../../src/core/dev/playIntegrityMint.js';
import { liveAllowlist } from '../../src/core/verifiers.js';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import { createCachedAllowlist } from '../../src/db/cachedAllowlist.js';
import { createApiKeyRepository } from '../../src/db/apiKeys.js';
import { createAppleKeyRepository } from '../../src/db/appleKeys.js';
import { createDevCaRepository } from '../../src/db/devCa.js';
import { TEST_SECRETS } from '../support/secrets.js';
import { backends, useDatabase } from '../support/databases.js';

const ca = (tag: number) => ({
  rootCert: new Uint8Array([tag, 1]),
  intermediateCert: new Uint8Array([tag, 2]),
  intermediateKey: new Uint8Array([tag, 3]),
});

describe.each(backends())('test-mode storage on $name', (backend) => {
  const handle = useDatabase(backend);

  it('API keys are live unless created as test keys', async () => {
    const repo = createApiKeyRepository(handle.db);
    await repo.insert({ id: 'live1', name: 'a', hash: 'h', expiresInSeconds: null });
    await repo.insert({ id: 'test1', name: 'b', hash: 'h', expiresInSeconds: null, mode: 'test' });
    expect((await repo.list()).map((k) => [k.id, k.mode])).toEqual([
      ['live1', 'live'],
      ['test1', 'test'],
    ]);
    expect((await repo.find('test1'))?.mode).toBe('test');
  });

  it('App Attest keys keep the mode they were registered with (live by default)', async () => {
    const repo = createAppleKeyRepository(handle.db);
    const record = (mode?: 'test') => ({
      keyId: randomBytes(32),
      publicKey: randomBytes(65),
      appId: 'T.a',
      environment: 'Production' as const,
      counter: 0,
      ...(mode ? { mode } : {}),
    });
    const a = record();
    const b = record('test');
    await repo.register(a);
    await repo.register(b);
    expect((await repo.find(a.keyId))?.mode).toBe('live');
    expect(await repo.find(b.keyId)).toBeNull();
    expect((await repo.find(b.keyId, 'test'))?.mode).toBe('test');
  });

  it('a package gets one test-only pair; racing first mints agree on it; live readers never see it', async () => {
    const repo = createAllowlistRepository(handle.db, TEST_SECRETS);
    expect(
      await repo.ensureTestPair('com.example.none', async () => createTestPlayKeys()),
    ).toBeNull();
    expect(await repo.addAndroid('com.example.app', null, {})).toEqual({
      package: 'added',
      pair: 'none',
      observe: [],
    });
    const results = await Promise.all(
      Array.from({ length: 6 }, () =>
        repo.ensureTestPair('com.example.app', async () => createTestPlayKeys()),
      ),
    );
    const ids = new Set(results.map((r) => r!.pair.id));
    expect(ids.size).toBe(1);
    expect(results.filter((r) => r!.created)).toHaveLength(1);
    const again = await repo.ensureTestPair('com.example.app', async () => {
      throw new Error('must not make a second pair');
    });
    expect(again).toMatchObject({ created: false, pair: results[0]!.pair });
    expect(Buffer.from(again!.pair.signingKey)).toEqual(Buffer.from(results[0]!.pair.signingKey));

    const [policy] = await repo.listAndroid();
    expect(policy!.keys).toEqual([expect.objectContaining({ id: [...ids][0], testOnly: true })]);
    const cached = createCachedAllowlist(repo, { ttlMs: 0 });
    expect((await liveAllowlist(cached).androidPackage('com.example.app'))!.keys).toEqual([]);
    expect((await cached.androidPackage('com.example.app'))!.keys).toHaveLength(1);
  });

  it('the development CA: init keeps the first, rotate replaces it; root() reads no secret', async () => {
    const repo = createDevCaRepository(handle.db, TEST_SECRETS);
    expect(await repo.get()).toBeNull();
    expect(await repo.root()).toBeNull();
    const first = await repo.put(ca(1), { replace: false });
    expect(first.stored).toBe(true);
    const second = await repo.put(ca(2), { replace: false });
    expect(second.stored).toBe(false);
    expect(Buffer.from(second.ca.rootCert)).toEqual(Buffer.from([1, 1]));
    const rotated = await repo.put(ca(3), { replace: true });
    expect(rotated.stored).toBe(true);
    expect(await repo.get()).toMatchObject({
      rootCert: new Uint8Array([3, 1]),
      intermediateCert: new Uint8Array([3, 2]),
      intermediateKey: new Uint8Array([3, 3]),
    });
    expect(await repo.root()).toEqual(new Uint8Array([3, 1]));
  });
});
