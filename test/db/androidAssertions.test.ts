/**
 * The android-key replay guard's table: an accepted assertion is recorded once per mode, asked
 * for read-only by verify-file (which then names the replay as the server does, with its hint),
 * and pruned by age.
 */
import { createHash, randomBytes } from 'node:crypto';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createAndroidKeyVerifier } from '../../src/core/androidKey/androidKeyVerifier.js';
import { revocationListOf } from '../../src/core/androidKey/revocationList.js';
import { findHints } from '../../src/core/explain.js';
import type { AndroidKeyStore } from '../../src/core/ports.js';
import { verifyToken, type VerifyInput } from '../../src/core/verify.js';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import { createAndroidKeyRepository } from '../../src/db/androidKeys.js';
import { createCachedAllowlist } from '../../src/db/cachedAllowlist.js';
import {
  ANDROID_NOW,
  ANDROID_PACKAGE,
  androidAssertion,
  androidRegistration,
  createAndroidTestCa,
  type AndroidTestCa,
} from '../support/androidFactory.js';
import { backends, useDatabase } from '../support/databases.js';
import { TEST_SECRETS } from '../support/secrets.js';

let ca: AndroidTestCa;
beforeAll(async () => {
  ca = await createAndroidTestCa();
});

describe.each(backends())('android-key assertions on $name', (backend) => {
  const db = useDatabase(backend);
  const digest = () => new Uint8Array(randomBytes(32));

  it('recorded once per mode; read back with the time it was accepted; unknown is null', async () => {
    const repo = createAndroidKeyRepository(db.db);
    const d = digest();
    const at = new Date('2026-11-20T10:00:00Z');
    expect(await repo.recordAssertion({ digest: d, mode: 'live', at })).toBe(true);
    expect(await repo.recordAssertion({ digest: d, mode: 'live', at: ANDROID_NOW })).toBe(false);
    expect(await repo.assertionAcceptedAt(d, 'live')).toEqual(at);
    // the test mode is a partition of its own
    expect(await repo.assertionAcceptedAt(d, 'test')).toBeNull();
    expect(await repo.recordAssertion({ digest: d, mode: 'test', at })).toBe(true);
    expect(await repo.assertionAcceptedAt(digest(), 'live')).toBeNull();
  });

  it('the pruner deletes what was accepted before the cutoff, in batches, and keeps the rest', async () => {
    const repo = createAndroidKeyRepository(db.db);
    const old = [digest(), digest(), digest()];
    const recent = digest();
    for (const d of old)
      await repo.recordAssertion({ digest: d, mode: 'live', at: new Date('2026-10-01T00:00:00Z') });
    await repo.recordAssertion({ digest: recent, mode: 'live', at: ANDROID_NOW });
    const cutoff = new Date('2026-11-01T00:00:00Z');
    expect(await repo.pruneAssertionBatch(cutoff, 2)).toBe(2);
    expect(await repo.pruneAssertionBatch(cutoff, 2)).toBe(1);
    expect(await repo.pruneAssertionBatch(cutoff, 2)).toBe(0);
    for (const d of old) expect(await repo.assertionAcceptedAt(d, 'live')).toBeNull();
    expect(await repo.assertionAcceptedAt(recent, 'live')).toEqual(ANDROID_NOW);
  });

  describe("verify-file's read-only check", () => {
    let server: ReturnType<typeof createAndroidKeyVerifier>;
    let readOnly: ReturnType<typeof createAndroidKeyVerifier>;
    beforeEach(async () => {
      const allowlist = createAllowlistRepository(db.db, TEST_SECRETS);
      await allowlist.addAndroid(ANDROID_PACKAGE, null, { keyAttestation: true });
      const repo = createAndroidKeyRepository(db.db);
      const deps = {
        roots: ca.roots,
        allowlist: createCachedAllowlist(allowlist, { ttlMs: 0 }),
        revocations: () => revocationListOf(new Map()),
      };
      server = createAndroidKeyVerifier({ ...deps, keys: repo });
      // as verify-file reads the database: finds keys, registers and records nothing
      const files: AndroidKeyStore = {
        find: (keyId) => repo.find(keyId),
        register: async () => true,
        assertionAcceptedAt: (d, mode) => repo.assertionAcceptedAt(d, mode),
      };
      readOnly = createAndroidKeyVerifier({ ...deps, keys: files });
    });
    const run = (verifier: typeof server, token: Uint8Array, nonce: Uint8Array) => {
      const input: VerifyInput = { token, expectedNonce: nonce };
      return verifyToken(input, {
        now: () => ANDROID_NOW,
        verifiers: { 'android-key': verifier },
      });
    };

    it('names an assertion the server accepted as a replay, with its time and hint; records nothing itself', async () => {
      const nonce = new Uint8Array(randomBytes(32));
      const made = await androidRegistration(ca, { nonce });
      expect((await run(server, made.token, nonce)).ok).toBe(true);
      const accepted = new Uint8Array(randomBytes(32));
      const assertion = androidAssertion(made.device, accepted);
      expect((await run(server, assertion, accepted)).ok).toBe(true);

      const explained = await run(readOnly, assertion, accepted);
      expect(explained).toMatchObject({ ok: false, reason: 'android_assertion_replayed' });
      if (explained.ok) return;
      expect(explained.detail).toContain(ANDROID_NOW.toISOString());
      const hints = await findHints(explained, {
        input: { token: assertion, expectedNonce: accepted },
        run: () => run(readOnly, assertion, accepted),
        allowlist: createCachedAllowlist(createAllowlistRepository(db.db, TEST_SECRETS), {
          ttlMs: 0,
        }),
        at: ANDROID_NOW,
      });
      expect(hints.map((h) => h.code)).toEqual(['assertion_replayed']);

      // a fresh assertion passes verify-file and stays unrecorded: the server still accepts it
      const fresh = new Uint8Array(randomBytes(32));
      const next = androidAssertion(made.device, fresh);
      expect((await run(readOnly, next, fresh)).ok).toBe(true);
      expect((await run(readOnly, next, fresh)).ok).toBe(true);
      const key = createHash('sha256').update(made.device.keyId).update(fresh).digest();
      expect(await createAndroidKeyRepository(db.db).assertionAcceptedAt(key, 'live')).toBeNull();
      expect((await run(server, next, fresh)).ok).toBe(true);
    });
  });
});
