import { randomBytes } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import { createApiKeyRepository } from '../../src/db/apiKeys.js';
import { createRevocationRepository } from '../../src/db/androidRevocations.js';
import {
  createAuditRepository,
  recordAudit,
  type AuditEvent,
  type Auditor,
} from '../../src/db/audit.js';
import type { Database } from '../../src/db/database.js';
import { backends, type TestDatabase } from '../support/databases.js';
import { TEST_SECRETS } from '../support/secrets.js';

describe.each(backends())('the audit trail on $name', (backend) => {
  let handle: TestDatabase;
  let logged: AuditEvent[];
  let auditor: Auditor;
  /** events recorded by the current test (the trail outlives reset(): it cannot be truncated) */
  let fromId: number;
  const recorded = async () =>
    (await createAuditRepository(handle.db).list()).filter((e) => e.id > fromId);

  beforeAll(async () => {
    handle = await backend.open();
  }, 120_000);
  afterAll(async () => {
    await handle?.close();
  });
  beforeEach(async () => {
    await handle.reset();
    logged = [];
    auditor = { actor: 'alice@ops', log: (e) => logged.push(e) };
    fromId = Math.max(0, ...(await createAuditRepository(handle.db).list()).map((e) => e.id));
  });

  it('keys create and revoke are recorded with the database time and the actor, never the hash', async () => {
    const keys = createApiKeyRepository(handle.db);
    const row = await keys.insert(
      { id: 'k1', name: 'ci', hash: '$argon2id$secret-hash', expiresInSeconds: 3600 },
      auditor,
    );
    expect(await keys.revoke('k1', auditor)).toBe(true);
    expect(await keys.revoke('k1', auditor)).toBe(false); // no change, no event
    const events = await recorded();
    expect(events.map((e) => [e.action, e.target, e.actor])).toEqual([
      ['keys.create', 'k1', 'alice@ops'],
      ['keys.revoke', 'k1', 'alice@ops'],
    ]);
    expect(events[0]!.before).toBeNull();
    expect(events[0]!.after).toEqual({
      name: 'ci',
      mode: 'live',
      expiresAt: expect.any(String),
      revokedAt: null,
      resultTokens: false,
      rejectionDetails: false,
      apps: null,
    });
    expect(Date.parse(events[0]!.after!.expiresAt as string)).toBe(row.expiresAt!.getTime());
    expect(events[1]!.before).toMatchObject({ name: 'ci', revokedAt: null });
    expect(events[1]!.after).toMatchObject({ name: 'ci', revokedAt: expect.any(String) });
    expect(Math.abs(events[0]!.at.getTime() - row.createdAt.getTime())).toBeLessThan(1000);
    expect(JSON.stringify(events)).not.toContain('secret-hash');
    // each event was handed to the log once, as stored
    expect(logged).toEqual(events);
  });

  // an App Attest entry's policy fields when none was given
  const policy = {
    requireReceipt: false,
    maxRiskMetric: null,
    validationCategories: [],
    minBundleVersion: null,
    allowMissingValidationCategory: false,
    platforms: [],
    observe: [],
    maxVerifiesPerDevice: null,
  };

  it('apple apps: add, update, an add that changes nothing (no event), remove', async () => {
    const repo = createAllowlistRepository(handle.db, TEST_SECRETS);
    await repo.addApple('ABCDE12345.com.x', undefined, auditor);
    await repo.addApple('ABCDE12345.com.x', 'any', auditor);
    await repo.addApple('ABCDE12345.com.x', undefined, auditor);
    await repo.addApple('ABCDE12345.com.x', 'any', auditor);
    expect(await repo.removeApple('ABCDE12345.com.x', auditor)).toBe(true);
    expect(await repo.removeApple('ABCDE12345.com.x', auditor)).toBe(false);
    const events = await recorded();
    expect(events.map((e) => [e.action, e.target, e.before, e.after])).toEqual([
      ['allowlist.add', 'apple:ABCDE12345.com.x', null, { ...policy, env: 'production' }],
      [
        'allowlist.update',
        'apple:ABCDE12345.com.x',
        { ...policy, env: 'production' },
        { ...policy, env: 'any' },
      ],
      ['allowlist.remove', 'apple:ABCDE12345.com.x', { ...policy, env: 'any' }, null],
    ]);
    expect(logged).toEqual(events);
  });

  it('apple apps: every policy field is in the trail, before and after', async () => {
    const repo = createAllowlistRepository(handle.db, TEST_SECRETS);
    await repo.addApple('ABCDE12345.com.x', undefined, auditor);
    await repo.addApple('ABCDE12345.com.x', undefined, auditor, {
      requireReceipt: true,
      maxRiskMetric: 3,
      validationCategories: ['appstore'],
      minBundleVersion: '2.0',
      allowMissingValidationCategory: true,
      maxVerifiesPerDevice: { max: 100, periodSeconds: 3600 },
    });
    await repo.addApple('ABCDE12345.com.x', undefined, auditor, { maxRiskMetric: 3 }); // no change
    const events = await recorded();
    expect(events.map((e) => [e.action, e.before, e.after])).toEqual([
      ['allowlist.add', null, { ...policy, env: 'production' }],
      [
        'allowlist.update',
        { ...policy, env: 'production' },
        {
          env: 'production',
          requireReceipt: true,
          maxRiskMetric: 3,
          validationCategories: ['appstore'],
          minBundleVersion: '2.0',
          allowMissingValidationCategory: true,
          platforms: [],
          observe: [],
          maxVerifiesPerDevice: { max: 100, periodSeconds: 3600 },
        },
      ],
    ]);
  });

  it('android packages: add, key rotation, policy update, retire a pair, remove; fingerprints only', async () => {
    const repo = createAllowlistRepository(handle.db, TEST_SECRETS);
    const p1 = { id: 'fp1', decryptionKey: randomBytes(32), verificationKey: randomBytes(91) };
    const p2 = { id: 'fp2', decryptionKey: randomBytes(32), verificationKey: randomBytes(91) };
    const digest = randomBytes(32);
    await repo.addAndroid('com.x', p1, { certificateDigests: [digest] }, auditor);
    await repo.addAndroid('com.x', p2, {}, auditor);
    await repo.addAndroid('com.x', p2, {}, auditor); // nothing changes
    await repo.addAndroid(
      'com.x',
      p2,
      { maxAgeSeconds: 60, denyRecallBits: ['first', 'third'] },
      auditor,
    );
    await repo.removeAndroid('com.x', 'fp1', auditor);
    await repo.removeAndroid('com.x', undefined, auditor);
    const events = await recorded();
    const policy = {
      minVerdict: 'MEETS_DEVICE_INTEGRITY',
      allowUnrecognized: false,
      certificateDigests: [digest.toString('hex')],
      requireLicensed: false,
      playProtectVerdicts: [],
      denyAppAccessRisk: [],
      maxDeviceActivity: null,
      denyRecallBits: [],
      minAccountActivity: null,
      denyLocationSpoofing: [],
      serviceAccount: null,
      testKeyPairs: [],
      maxVerifiesPerDevice: null,
      ...KEY_ATTESTATION_OFF,
    };
    expect(events.map((e) => [e.action, e.target, e.before, e.after])).toEqual([
      [
        'allowlist.add',
        'android:com.x',
        null,
        { ...policy, maxAgeSeconds: 600, keyPairs: ['fp1'] },
      ],
      [
        'allowlist.key.add',
        'android:com.x',
        { ...policy, maxAgeSeconds: 600, keyPairs: ['fp1'] },
        { ...policy, maxAgeSeconds: 600, keyPairs: ['fp1', 'fp2'] },
      ],
      [
        'allowlist.update',
        'android:com.x',
        { ...policy, maxAgeSeconds: 600, keyPairs: ['fp1', 'fp2'] },
        {
          ...policy,
          maxAgeSeconds: 60,
          denyRecallBits: ['first', 'third'],
          keyPairs: ['fp1', 'fp2'],
        },
      ],
      [
        'allowlist.key.remove',
        'android:com.x',
        { keyPairs: ['fp1', 'fp2'], testKeyPairs: [] },
        { keyPairs: ['fp2'], testKeyPairs: [] },
      ],
      [
        'allowlist.remove',
        'android:com.x',
        { ...policy, maxAgeSeconds: 60, denyRecallBits: ['first', 'third'], keyPairs: ['fp2'] },
        null,
      ],
    ]);
    const text = JSON.stringify(events);
    for (const key of [
      p1.decryptionKey,
      p1.verificationKey,
      p2.decryptionKey,
      p2.verificationKey,
    ]) {
      expect(text).not.toContain(key.toString('hex'));
      expect(text).not.toContain(key.toString('base64'));
    }
  });

  it('key attestation policy changes are audited, field by field', async () => {
    const repo = createAllowlistRepository(handle.db, TEST_SECRETS);
    const bootKey = randomBytes(32);
    await repo.addAndroid('com.k', null, { keyAttestation: true }, auditor);
    await repo.addAndroid(
      'com.k',
      null,
      {
        minSecurityLevel: 'StrongBox',
        allowUnlocked: true,
        bootKeys: [bootKey],
        maxPatchAgeMonths: 12,
      },
      auditor,
    );
    const events = await recorded();
    expect(events.map((e) => e.action)).toEqual(['allowlist.add', 'allowlist.update']);
    expect(events[0]!.after).toMatchObject({ ...KEY_ATTESTATION_OFF, keyAttestation: true });
    expect(events[1]!.before).toMatchObject({ ...KEY_ATTESTATION_OFF, keyAttestation: true });
    expect(events[1]!.after).toMatchObject({
      keyAttestation: true,
      minSecurityLevel: 'StrongBox',
      allowUnlocked: true,
      bootKeys: [bootKey.toString('hex')],
      maxPatchAgeMonths: 12,
    });
  });

  it('a status list update is audited (source, takenAt, entries); an older list is neither stored nor recorded', async () => {
    const repo = createRevocationRepository(handle.db);
    const entries = new Map([[0x1234n, { status: 'REVOKED', reason: 'KEY_COMPROMISE' }]]);
    const takenAt = new Date('2026-11-01T00:00:00Z');
    expect(await repo.replace(entries, 'file status.json', takenAt, auditor)).toBe(true);
    expect(
      await repo.replace(entries, 'file old.json', new Date('2026-01-01T00:00:00Z'), auditor),
    ).toBe(false);
    const events = await recorded();
    expect(events.map((e) => [e.action, e.target, e.before])).toEqual([
      ['android.revocations.update', 'status list', null],
    ]);
    expect(events[0]!.after).toMatchObject({ source: 'file status.json', entries: 1 });
    expect(logged.map((e) => e.action)).toEqual(['android.revocations.update']);
  });

  it('the database refuses UPDATE, DELETE and TRUNCATE of audit events', async () => {
    await createApiKeyRepository(handle.db).insert(
      { id: 'k2', name: 'x', hash: 'h', expiresInSeconds: null },
      auditor,
    );
    const [event] = await recorded();
    for (const statement of [
      sql`update audit_events set actor = 'mallory' where id = ${event!.id}`,
      sql`delete from audit_events where id = ${event!.id}`,
      sql`truncate audit_events`,
    ]) {
      await expect(handle.db.execute(statement)).rejects.toThrow();
    }
    expect(await recorded()).toEqual([event]);
  });

  it('recordAudit commits with its transaction, and leaves nothing when it rolls back', async () => {
    const change = (target: string) => ({
      action: 'test.change',
      target,
      before: null,
      after: { state: 'on' },
    });
    const inTransaction = (work: (tx: Database) => Promise<void>) =>
      handle.db.transaction(async (tx) => work(tx as unknown as Database));
    await inTransaction(async (tx) => {
      const event = await recordAudit(tx, auditor, change('kept'));
      expect(event).toMatchObject({
        actor: 'alice@ops',
        action: 'test.change',
        target: 'kept',
        after: { state: 'on' },
      });
    });
    await expect(
      inTransaction(async (tx) => {
        await recordAudit(tx, auditor, change('rolled back'));
        throw new Error('the change failed');
      }),
    ).rejects.toThrow('the change failed');
    expect((await recorded()).map((e) => e.target)).toEqual(['kept']);
  });

  it('lists by action or action group, and by age on the database clock', async () => {
    const keys = createApiKeyRepository(handle.db);
    await keys.insert({ id: 'k3', name: 'x', hash: 'h', expiresInSeconds: null }, auditor);
    await keys.revoke('k3', auditor);
    await createAllowlistRepository(handle.db, TEST_SECRETS).addApple(
      'ABCDE12345.com.y',
      undefined,
      auditor,
    );
    await handle.db.execute(
      sql`insert into audit_events (at, actor, action, target) values (now() - interval '2 days', 'old', 'keys.create', 'k0')`,
    );
    const audit = createAuditRepository(handle.db);
    const mine = (events: AuditEvent[]) =>
      events.filter((e) => e.id > fromId).map((e) => `${e.action} ${e.target}`);
    expect(mine(await audit.list({ action: 'keys.revoke' }))).toEqual(['keys.revoke k3']);
    expect(mine(await audit.list({ action: 'keys' }))).toEqual([
      'keys.create k3',
      'keys.revoke k3',
      'keys.create k0',
    ]);
    expect(mine(await audit.list({ action: 'key' }))).toEqual([]);
    expect(mine(await audit.list({ sinceSeconds: 86_400 }))).toEqual([
      'keys.create k3',
      'keys.revoke k3',
      'allowlist.add apple:ABCDE12345.com.y',
    ]);
    expect(mine(await audit.list({ sinceSeconds: 3 * 86_400, action: 'keys.create' }))).toEqual([
      'keys.create k3',
      'keys.create k0',
    ]);
  });
});

/** The key attestation fields of an entry that never turned it on. */
const KEY_ATTESTATION_OFF = {
  keyAttestation: false,
  minSecurityLevel: 'TrustedEnvironment',
  allowUnlocked: false,
  bootKeys: [],
  maxPatchAgeMonths: null,
  maxKeysPerIssuer: null,
  observe: [],
};
