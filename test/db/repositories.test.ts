import { randomBytes } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import { createCachedAllowlist } from '../../src/db/cachedAllowlist.js';
import { createApiKeyRepository } from '../../src/db/apiKeys.js';
import { createAppleKeyRepository } from '../../src/db/appleKeys.js';
import { migrationStatus, runMigrations } from '../../src/db/migrate.js';
import { createSessionRepository } from '../../src/db/sessions.js';
import { rowsOf, type Database } from '../../src/db/database.js';
import { backends, clientOf, useDatabase } from '../support/databases.js';
import { TEST_SECRETS } from '../support/secrets.js';

/** An App Attest entry's policy fields when none was given. */
const NO_POLICY = {
  requireReceipt: false,
  maxRiskMetric: null,
  validationCategories: [],
  minBundleVersion: null,
  allowMissingValidationCategory: false,
  observe: [],
  maxVerifiesPerDevice: null,
  platforms: [],
};

describe.each(backends())('repositories on $name', (backend) => {
  const handle = useDatabase(backend);

  const apiKey = async (id = 'k1') => {
    await createApiKeyRepository(handle.db).insert({
      id,
      name: id,
      hash: 'h',
      expiresInSeconds: null,
    });
    return id;
  };

  it('migrations are recorded and a second run applies nothing', async () => {
    const status = await migrationStatus(handle.db);
    expect(status.length).toBeGreaterThan(0);
    expect(status.every((m) => m.applied)).toBe(true);
    expect(await runMigrations(handle)).toEqual({ applied: 0, sealed: 0 });
  });

  describe('sessions', () => {
    it('consumes a session exactly once and returns its nonce', async () => {
      const sessions = createSessionRepository(handle.db);
      const nonce = randomBytes(32);
      const { expiresAt } = await sessions.create({
        reference: 'r1',
        apiKeyId: await apiKey(),
        serverNonce: nonce,
        ttlSeconds: 300,
      });
      expect(expiresAt.getTime()).toBeGreaterThan(Date.now() + 290_000);
      const first = await sessions.consume('r1', 'k1');
      expect(first).toEqual({ ok: true, serverNonce: new Uint8Array(nonce) });
      expect(await sessions.consume('r1', 'k1')).toEqual({ ok: false, reason: 'session_consumed' });
    });

    it('a new session alone commits without waiting for its flush: the connection stays synchronous', async () => {
      // one connection, so the statement after the insert runs where the insert ran
      const client = handle.url ? clientOf(handle.url, { max: 1 }) : undefined;
      const db = client ? (drizzlePostgres(client) as unknown as Database) : handle.db;
      try {
        await createSessionRepository(db).create({
          reference: 'r1',
          apiKeyId: await apiKey(),
          serverNonce: randomBytes(32),
          ttlSeconds: 300,
        });
        const shown = rowsOf<{ synchronous_commit: string }>(
          await db.execute(sql`show synchronous_commit`),
        );
        expect(shown[0]!.synchronous_commit).toBe('on');
        expect((await createSessionRepository(db).consume('r1', 'k1')).ok).toBe(true);
      } finally {
        await client?.end();
      }
    });

    it('reports a session of another key as unknown and leaves it active', async () => {
      const sessions = createSessionRepository(handle.db);
      await sessions.create({
        reference: 'r1',
        apiKeyId: await apiKey('k1'),
        serverNonce: randomBytes(32),
        ttlSeconds: 300,
      });
      await apiKey('k2');
      expect(await sessions.consume('r1', 'k2')).toEqual({ ok: false, reason: 'session_unknown' });
      expect((await sessions.consume('r1', 'k1')).ok).toBe(true);
    });

    it('reports unknown references and expired sessions', async () => {
      const sessions = createSessionRepository(handle.db);
      await sessions.create({
        reference: 'old',
        apiKeyId: await apiKey(),
        serverNonce: randomBytes(32),
        ttlSeconds: 0,
      });
      expect(await sessions.consume('nope', 'k1')).toEqual({
        ok: false,
        reason: 'session_unknown',
      });
      expect(await sessions.consume('old', 'k1')).toEqual({ ok: false, reason: 'session_expired' });
      expect(await sessions.consume('old', 'k1')).toEqual({
        ok: false,
        reason: 'session_consumed',
      });
    });

    it('prunes only sessions expired or consumed before the cut-off', async () => {
      const sessions = createSessionRepository(handle.db);
      const id = await apiKey();
      await sessions.create({
        reference: 'live',
        apiKeyId: id,
        serverNonce: randomBytes(32),
        ttlSeconds: 300,
      });
      await sessions.create({
        reference: 'expired',
        apiKeyId: id,
        serverNonce: randomBytes(32),
        ttlSeconds: 0,
      });
      await sessions.create({
        reference: 'used',
        apiKeyId: id,
        serverNonce: randomBytes(32),
        ttlSeconds: 300,
      });
      await sessions.consume('used', id);
      await new Promise((r) => setTimeout(r, 20));
      expect(await sessions.prune(3600)).toBe(0);
      expect(await sessions.prune(0)).toBe(2);
      expect(await sessions.counts()).toEqual({ active: 1, consumed: 0, expired: 0 });
    });
  });

  describe('apple keys', () => {
    const record = () => ({
      keyId: randomBytes(32),
      publicKey: randomBytes(91),
      appId: 'T.app',
      environment: 'Production' as const,
      counter: 0,
    });

    it('registers once, finds, and raises the counter only upwards', async () => {
      const keys = createAppleKeyRepository(handle.db);
      const r = record();
      expect(await keys.register(r)).toBe(true);
      expect(await keys.register({ ...r, counter: 9 })).toBe(false);
      expect(await keys.find(r.keyId)).toEqual({
        ...r,
        keyId: new Uint8Array(r.keyId),
        publicKey: new Uint8Array(r.publicKey),
        mode: 'live',
        riskMetric: null,
        validationCategory: null,
        bundleVersion: null,
        platform: 'iOS',
      });
      expect(await keys.raiseCounter(r.keyId, 5)).toBe(true);
      expect(await keys.raiseCounter(r.keyId, 5)).toBe(false);
      expect(await keys.raiseCounter(r.keyId, 4)).toBe(false);
      expect(await keys.raiseCounter(r.keyId, 0xffffffff)).toBe(true);
      expect((await keys.find(r.keyId))?.counter).toBe(0xffffffff);
      expect(await keys.raiseCounter(randomBytes(32), 1)).toBe(false);
      expect(await keys.find(randomBytes(32))).toBeNull();
    });

    it('raises the counter only while the row still holds the expected key, app and environment', async () => {
      const keys = createAppleKeyRepository(handle.db);
      const r = record();
      await keys.register(r);
      expect(await keys.raiseCounterIfUnchanged!(r, 3)).toBe(true);
      expect(await keys.raiseCounterIfUnchanged!(r, 3)).toBe(false);
      expect(await keys.raiseCounterIfUnchanged!({ ...r, publicKey: randomBytes(91) }, 4)).toBe(
        false,
      );
      expect(await keys.raiseCounterIfUnchanged!({ ...r, appId: 'T.other' }, 4)).toBe(false);
      expect(await keys.raiseCounterIfUnchanged!({ ...r, environment: 'Development' }, 4)).toBe(
        false,
      );
      expect(await keys.raiseCounterIfUnchanged!({ ...r, mode: 'test' }, 4)).toBe(false);
      expect(await keys.raiseCounterIfUnchanged!({ ...r, keyId: randomBytes(32) }, 4)).toBe(false);
      expect((await keys.find(r.keyId))?.counter).toBe(3);
      expect(await keys.raiseCounterIfUnchanged!(r, 4)).toBe(true);
      expect((await keys.find(r.keyId))?.counter).toBe(4);
    });
  });

  describe('api keys', () => {
    it('inserts, lists and revokes once', async () => {
      const repo = createApiKeyRepository(handle.db);
      const row = await repo.insert({
        id: 'abc',
        name: 'ci',
        hash: '$argon2id$x',
        expiresInSeconds: 3600,
      });
      expect(row.expiresAt!.getTime()).toBeGreaterThan(Date.now() + 3500_000);
      expect((await repo.list()).map((r) => r.id)).toEqual(['abc']);
      expect(await repo.revoke('abc')).toBe(true);
      expect(await repo.revoke('abc')).toBe(false);
      expect(await repo.revoke('missing')).toBe(false);
      expect((await repo.find('abc'))?.revokedAt).toBeInstanceOf(Date);
    });
  });

  describe('allowlist', () => {
    const pair = (id: string) => ({
      id,
      decryptionKey: randomBytes(32),
      verificationKey: randomBytes(91),
    });

    it('adds, updates and removes apple apps', async () => {
      const repo = createAllowlistRepository(handle.db, TEST_SECRETS);
      expect(await repo.addApple('T.a', 'production')).toMatchObject({
        result: 'added',
        env: 'production',
      });
      expect(await repo.addApple('T.a', 'any')).toMatchObject({ result: 'updated', env: 'any' });
      // without an env, an existing app keeps its own
      expect(await repo.addApple('T.a', undefined)).toMatchObject({
        result: 'unchanged',
        env: 'any',
      });
      expect(await repo.listApple()).toEqual([{ ...NO_POLICY, appId: 'T.a', env: 'any' }]);
      expect(await repo.addApple('T.b', undefined)).toMatchObject({
        result: 'added',
        env: 'production',
      });
      expect(await repo.removeApple('T.b')).toBe(true);
      expect(await repo.removeApple('T.a')).toBe(true);
      expect(await repo.removeApple('T.a')).toBe(false);
    });

    it('keeps each App Attest policy field until it is given, and null / [] stop checking', async () => {
      const repo = createAllowlistRepository(handle.db, TEST_SECRETS);
      const full = {
        requireReceipt: true,
        maxRiskMetric: 5,
        validationCategories: ['appstore', 'testflight'],
        minBundleVersion: '1.2',
        allowMissingValidationCategory: true,
        maxVerifiesPerDevice: { max: 1000, periodSeconds: 86_400 },
      };
      expect((await repo.addApple('T.a', undefined, undefined, full)).policy).toEqual({
        appId: 'T.a',
        env: 'production',
        ...full,
        observe: [],
        platforms: [],
      });
      // an update without policy fields keeps them all
      expect((await repo.addApple('T.a', 'any')).policy).toEqual({
        appId: 'T.a',
        env: 'any',
        ...full,
        observe: [],
        platforms: [],
      });
      const cleared = await repo.addApple('T.a', undefined, undefined, {
        maxRiskMetric: null,
        validationCategories: [],
        minBundleVersion: null,
        requireReceipt: false,
        maxVerifiesPerDevice: null,
      });
      expect(cleared.policy).toEqual({
        ...NO_POLICY,
        appId: 'T.a',
        env: 'any',
        allowMissingValidationCategory: true,
      });
      expect(await repo.listApple()).toEqual([cleared.policy]);
    });

    it('adds a package, then a second key pair without losing the policy, then retires one', async () => {
      const repo = createAllowlistRepository(handle.db, TEST_SECRETS);
      const digest = randomBytes(32);
      const p1 = pair('p1');
      expect(
        await repo.addAndroid('com.x', p1, {
          certificateDigests: [digest],
          minVerdict: 'MEETS_STRONG_INTEGRITY',
          maxAgeSeconds: 60,
        }),
      ).toEqual({ package: 'added', pair: 'added', observe: [] });
      expect(await repo.addAndroid('com.x', pair('p2'), {})).toEqual({
        package: 'updated',
        pair: 'added',
        observe: [],
      });
      expect(await repo.addAndroid('com.x', pair('p2'), {})).toEqual({
        package: 'unchanged',
        pair: 'exists',
        observe: [],
      });
      let [pkg] = await repo.listAndroid();
      expect(pkg).toMatchObject({
        packageName: 'com.x',
        minVerdict: 'MEETS_STRONG_INTEGRITY',
        allowUnrecognized: false,
        maxAgeSeconds: 60,
      });
      expect(pkg!.certificateDigests).toEqual([new Uint8Array(digest)]);
      expect(pkg!.keys.map((k) => k.id)).toEqual(['p1', 'p2']);
      expect(pkg!.keys[0]!.decryptionKey).toEqual(new Uint8Array(p1.decryptionKey));
      expect(await repo.removeAndroid('com.x', 'p1')).toBe(true);
      [pkg] = await repo.listAndroid();
      expect(pkg!.keys.map((k) => k.id)).toEqual(['p2']);
      expect(await repo.removeAndroid('com.x')).toBe(true);
      expect(await repo.listAndroid()).toEqual([]);
    });

    it('serves a cached snapshot that is re-read after its ttl', async () => {
      const repo = createAllowlistRepository(handle.db, TEST_SECRETS);
      let clock = 0;
      const cached = createCachedAllowlist(repo, { ttlMs: 5000, now: () => clock });
      await repo.addApple('T.a', 'production');
      expect(await cached.appleApp('T.a')).toEqual({
        ...NO_POLICY,
        appId: 'T.a',
        env: 'production',
      });
      await repo.removeApple('T.a');
      clock = 4999;
      expect(await cached.appleApp('T.a')).not.toBeNull();
      clock = 5000;
      expect(await cached.appleApp('T.a')).toBeNull();
    });
  });
});
