/**
 * The leaked-keybox defence on both databases: with `--max-keys-per-issuer 3/1h` the 4th new
 * android-key key under one issuing certificate is refused (android_issuer_overused) and not
 * registered; observed, it is counted and accepted; a test API key's registrations count apart
 * from live ones; two instances (two connection pools) counting at once agree on exactly N. The
 * blocklist of issuing-certificate serials refuses a registration as android_chain_revoked.
 */
import { randomBytes, X509Certificate } from 'node:crypto';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createAndroidKeyVerifier } from '../../src/core/androidKey/androidKeyVerifier.js';
import { revocationListOf } from '../../src/core/androidKey/revocationList.js';
import type { KeyMode } from '../../src/core/ports.js';
import type { VerifyOutcome } from '../../src/core/outcome.js';
import { verifyToken } from '../../src/core/verify.js';
import { createAllowlistRepository } from '../../src/db/allowlist.js';
import { createAndroidKeyRepository } from '../../src/db/androidKeys.js';
import { createCachedAllowlist } from '../../src/db/cachedAllowlist.js';
import { openDatabase } from '../../src/db/client.js';
import type { DatabaseHandle } from '../../src/db/database.js';
import { createIssuerVelocityRepository } from '../../src/db/issuerVelocity.js';
import { cachedIssuerBlocks, createIssuerBlockRepository } from '../../src/db/issuerBlocks.js';
import { createAuditRepository } from '../../src/db/audit.js';
import {
  ANDROID_NOW,
  ANDROID_PACKAGE,
  androidRegistration,
  createAndroidTestCa,
  type AndroidTestCa,
} from '../support/androidFactory.js';
import { backends, useDatabase } from '../support/databases.js';
import { TEST_SECRETS } from '../support/secrets.js';

let ca: AndroidTestCa;
let other: AndroidTestCa;
beforeAll(async () => {
  ca = await createAndroidTestCa();
  other = await createAndroidTestCa({ intermediateSubject: 'CN=Another Keybox, O=attest tests' });
});

describe.each(backends())('keys per issuing certificate on $name', (backend) => {
  const db = useDatabase(backend);

  const allow = (policy: { observe?: boolean; limit?: string | null } = {}) =>
    createAllowlistRepository(db.db, TEST_SECRETS).addAndroid(ANDROID_PACKAGE, null, {
      keyAttestation: true,
      maxKeysPerIssuer: policy.limit === undefined ? '3/3600' : policy.limit,
      ...(policy.observe ? { observeChange: { observe: ['android_issuer_overused'] } } : {}),
    });

  /** A verifier as one instance runs it, over `handle` (its own pool). */
  const verifierOn = (handle: DatabaseHandle, mode: KeyMode = 'live') => {
    const verifier = createAndroidKeyVerifier({
      roots: [...ca.roots, ...other.roots],
      allowlist: createCachedAllowlist(createAllowlistRepository(handle.db, TEST_SECRETS), {
        ttlMs: 0,
      }),
      keys: createAndroidKeyRepository(handle.db),
      issuers: createIssuerVelocityRepository(handle.db),
      blockedIssuers: () => createIssuerBlockRepository(handle.db).serials(),
      revocations: () => revocationListOf(new Map()),
      mode,
    });
    return async (from = ca): Promise<VerifyOutcome> => {
      const nonce = new Uint8Array(randomBytes(32));
      const made = await androidRegistration(from, { nonce });
      return verifyToken(
        { token: made.token, expectedNonce: nonce },
        { now: () => ANDROID_NOW, verifiers: { 'android-key': verifier } },
      );
    };
  };
  const verdict = (o: VerifyOutcome) => (o.ok ? 'valid' : o.reason);
  const registered = async () => (await createAndroidKeyRepository(db.db).list()).length;

  beforeEach(async () => {
    await allow();
  });

  it('the 4th new key under one issuing certificate is refused and not registered; another issuer is not affected', async () => {
    const register = verifierOn(db);
    const outcomes = [];
    for (let i = 0; i < 4; i++) outcomes.push(await register());
    expect(outcomes.map(verdict)).toEqual(['valid', 'valid', 'valid', 'android_issuer_overused']);
    const refused = outcomes[3]!;
    expect(refused.checks.find((c) => c.id === 'android.issuerVelocity')).toMatchObject({
      status: 'fail',
    });
    if (!refused.ok) expect(refused.detail).toMatch(/already attested 3 new keys/);
    expect(outcomes[2]!.checks.find((c) => c.id === 'android.issuerVelocity')?.detail).toMatch(
      /new key 3 of at most 3/,
    );
    expect(await registered()).toBe(3);
    // refused keys are not counted: still refused, still 3
    expect(verdict(await register())).toBe('android_issuer_overused');
    expect(verdict(await register(other))).toBe('valid');
    expect(await registered()).toBe(4);
  });

  it('observed: the 4th key is counted and accepted, the failure recorded', async () => {
    await allow({ observe: true });
    const register = verifierOn(db);
    const outcomes = [];
    for (let i = 0; i < 5; i++) outcomes.push(await register());
    expect(outcomes.map(verdict)).toEqual(['valid', 'valid', 'valid', 'valid', 'valid']);
    expect(outcomes.slice(0, 3).every((o) => o.ok && !o.observed)).toBe(true);
    expect(outcomes[3]!.ok && outcomes[3]!.observed).toEqual(['android_issuer_overused']);
    expect(outcomes[4]!.checks.find((c) => c.id === 'android.issuerVelocity')?.detail).toMatch(
      /attested 5 new keys/,
    );
    expect(await registered()).toBe(5);
    const [top] = await createIssuerVelocityRepository(db.db).nearest({
      at: ANDROID_NOW,
      mode: 'live',
      limit: 5,
    });
    expect(top).toMatchObject({ packageName: ANDROID_PACKAGE, count: 5, max: 3 });
  });

  it("a test key's registrations never count for live keys (nor the other way)", async () => {
    const live = verifierOn(db, 'live');
    const test = verifierOn(db, 'test');
    expect(verdict(await live())).toBe('valid');
    const tests = [];
    for (let i = 0; i < 4; i++) tests.push(verdict(await test()));
    expect(tests).toEqual(['valid', 'valid', 'valid', 'android_issuer_overused']);
    expect(verdict(await live())).toBe('valid');
    expect(verdict(await live())).toBe('valid');
    expect(verdict(await live())).toBe('android_issuer_overused');
    const live3 = await createIssuerVelocityRepository(db.db).nearest({
      at: ANDROID_NOW,
      mode: 'live',
      limit: 5,
    });
    expect(live3.map((r) => r.count)).toEqual([3]);
  });

  it('no limit: nothing is counted', async () => {
    await allow({ limit: null });
    const register = verifierOn(db);
    for (let i = 0; i < 4; i++) expect(verdict(await register())).toBe('valid');
    const outcome = await register();
    expect(outcome.checks.find((c) => c.id === 'android.issuerVelocity')?.status).toBe('skip');
    expect(
      await createIssuerVelocityRepository(db.db).nearest({
        at: ANDROID_NOW,
        mode: 'live',
        limit: 5,
      }),
    ).toEqual([]);
  });

  it('two instances registering at once agree: exactly 3 of 12 new keys are accepted', async () => {
    const second = await openDatabase({ url: db.url, dataDir: '', role: 'server', poolSize: 20 });
    try {
      const a = verifierOn(db);
      const b = verifierOn(second);
      const outcomes = await Promise.all(
        Array.from({ length: 12 }, (_, i) => (i % 2 === 0 ? a() : b())),
      );
      expect(outcomes.filter((o) => o.ok)).toHaveLength(3);
      expect(outcomes.filter((o) => !o.ok).map(verdict)).toEqual(
        Array(9).fill('android_issuer_overused'),
      );
      expect(await registered()).toBe(3);
    } finally {
      await second.close();
    }
  });

  it('a blocked issuing certificate: its registrations are refused as android_chain_revoked (audited); unblocked they pass', async () => {
    const register = verifierOn(db);
    const blocks = createIssuerBlockRepository(db.db);
    const serial = new X509Certificate(Buffer.from(ca.intermediate.der)).serialNumber;
    const normalized = BigInt(`0x${serial}`).toString(16);
    const auditor = { actor: 'test', log: () => {} };
    expect(await blocks.block(normalized, auditor)).toBe(true);
    expect(await blocks.block(normalized, auditor)).toBe(false);
    const refused = await register();
    expect(verdict(refused)).toBe('android_chain_revoked');
    expect(refused.checks.find((c) => c.id === 'android.revocation')?.status).toBe('fail');
    if (!refused.ok) expect(refused.detail).toMatch(/blocklist/);
    expect(await blocks.unblock(normalized, auditor)).toBe(true);
    expect(verdict(await register())).toBe('valid');
    const actions = (await createAuditRepository(db.db).list())
      .map((e) => [e.action, e.target])
      .filter(([a]) => a!.startsWith('android_issuers.'));
    expect(actions.sort()).toEqual([
      ['android_issuers.block', normalized],
      ['android_issuers.unblock', normalized],
    ]);
  });
});

describe('cachedIssuerBlocks', () => {
  it('reads once per ttl, and again after a failed read', async () => {
    let at = 0;
    let reads = 0;
    let fail = false;
    const cached = cachedIssuerBlocks(
      {
        serials: async () => {
          reads++;
          if (fail) throw new Error('down');
          return new Set(['a']);
        },
      },
      { ttlMs: 5000, now: () => at },
    );
    await cached();
    await cached();
    expect(reads).toBe(1);
    at = 5000;
    fail = true;
    await expect(cached()).rejects.toThrow('down');
    fail = false;
    expect(await cached()).toEqual(new Set(['a']));
    expect(reads).toBe(3);
  });
});
