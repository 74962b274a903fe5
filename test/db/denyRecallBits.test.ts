// The device recall policy column (android_packages.deny_recall_bits) on both databases: set,
// kept when a change does not name it, cleared with an empty list, and read back by the allowlist
// the verifier uses.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import { createCachedAllowlist } from '../../src/db/cachedAllowlist.js';
import { backends, useDatabase } from '../support/databases.js';
import { TEST_SECRETS } from '../support/secrets.js';

describe.each(backends())('deny_recall_bits on $name', (backend) => {
  const db = useDatabase(backend);

  it('is stored, kept, cleared, and reaches the verifier', async () => {
    const repo = createAllowlistRepository(db.db, TEST_SECRETS);
    const cached = createCachedAllowlist(repo, { ttlMs: 0 });
    const read = async () => (await cached.androidPackage('com.x'))?.denyRecallBits;
    const pair = { id: 'fp1', decryptionKey: randomBytes(32), verificationKey: randomBytes(91) };

    await repo.addAndroid('com.x', pair, {});
    expect(await read()).toEqual([]);
    await repo.addAndroid('com.x', null, { denyRecallBits: ['second', 'third'] });
    expect(await read()).toEqual(['second', 'third']);
    await repo.addAndroid('com.x', null, { maxAgeSeconds: 30 });
    expect(await read()).toEqual(['second', 'third']);
    await repo.addAndroid('com.x', null, { denyRecallBits: [] });
    expect(await read()).toEqual([]);
  });
});
