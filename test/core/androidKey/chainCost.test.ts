// What a hostile android-key chain costs, counted in signature verifications (issue 28, item 2):
// every certificate signature the chain verifier checks goes through X509Certificate#verify, so
// a spy on it counts them. The bounds are counts, not times.
import { randomBytes, X509Certificate } from 'node:crypto';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { revocationListOf } from '../../../src/core/androidKey/revocationList.js';
import {
  defaultAndroidRoots,
  type AndroidRootKey,
} from '../../../src/core/androidKey/trustRoots.js';
import { defaultAppleRoots } from '../../../src/core/apple/trustRoots.js';
import {
  createMemoryAllowlist,
  createMemoryAndroidKeyStore,
  createMemoryAppleKeyStore,
} from '../../../src/core/memoryStores.js';
import { buildVerifiers } from '../../../src/core/verifiers.js';
import { verifyToken } from '../../../src/core/verify.js';
import {
  ANDROID_NOW,
  androidKeyPolicy,
  androidRegistration,
  createAndroidTestCa,
  type AndroidTestCa,
} from '../../support/androidFactory.js';
import { loadAndroidVectors, vectorToken } from '../../support/androidVectors.js';
import {
  bigExponentKey,
  ecKey,
  hostileChainToken,
  rsaKey,
  rsaPublicKeyOnly,
  type HostileKey,
} from '../../support/hostileAndroidChains.js';

let bigRsa: HostileKey;
let p384: HostileKey;
let ca: AndroidTestCa;
beforeAll(async () => {
  [bigRsa, p384, ca] = await Promise.all([bigExponentKey(), ecKey('P-384'), createAndroidTestCa()]);
}, 120_000);

afterEach(() => {
  vi.restoreAllMocks();
});

/** One verifier (its caches live as long as it does) and a runner that counts signature checks. */
function service(roots: readonly AndroidRootKey[] = defaultAndroidRoots()) {
  const verifiers = buildVerifiers({
    allowlist: createMemoryAllowlist({ android: [androidKeyPolicy()] }),
    appleKeys: createMemoryAppleKeyStore(),
    appleRoots: defaultAppleRoots(),
    android: {
      keys: createMemoryAndroidKeyStore(),
      roots,
      revocations: () => revocationListOf(new Map()),
    },
  });
  return async (token: Uint8Array, nonce: Uint8Array, at = ANDROID_NOW, challenge?: Buffer) => {
    const spy = vi.spyOn(X509Certificate.prototype, 'verify');
    try {
      const outcome = await verifyToken(
        { token, expectedNonce: nonce, ...(challenge ? { challenge } : {}) },
        { now: () => at, verifiers },
      );
      const checks = spy.mock.calls.length;
      return outcome.ok
        ? { reason: 'accepted', checks, detail: '', facts: outcome.facts }
        : { reason: outcome.reason, checks, detail: outcome.detail, facts: outcome.facts };
    } finally {
      spy.mockRestore();
    }
  };
}

describe('signature verifications per hostile android-key chain', () => {
  it('ten certificates whose nine issuers share an RSA-3072 key with a 3,064-bit exponent: none', async () => {
    const run = service();
    const nonce = randomBytes(32);
    const { token } = await hostileChainToken({ length: 10, key: bigRsa, nonce });
    // before the profile checks: eight full exponentiations (and four root tries), then the top
    // was found untrusted
    const outcome = await run(token, nonce);
    expect(outcome).toMatchObject({ reason: 'android_chain_invalid', checks: 0 });
  });

  it('the same big-exponent issuers under a configured root: refused by their key, not verified', async () => {
    const run = service(ca.roots);
    const nonce = randomBytes(32);
    const { token } = await hostileChainToken({ length: 10, key: bigRsa, nonce, root: ca.root });
    expect(await run(token, nonce)).toMatchObject({ reason: 'android_chain_invalid', checks: 0 });
  });

  it('fan-out (nine issuers with one name and one P-384 key, each could issue each): two checks', async () => {
    const run = service();
    const nonce = randomBytes(32);
    const { token } = await hostileChainToken({ length: 10, key: p384, nonce, sharedName: true });
    // only the top is tried, against the one Google root of the key type its algorithm names
    // (Key Attestation CA1 for ECDSA), then the AOSP software root of that type to name it:
    // nothing below the top
    expect(await run(token, nonce)).toMatchObject({ reason: 'android_chain_invalid', checks: 2 });
  });

  it('a fan-out chain of ten under a configured root: each link once, then one per new leaf', async () => {
    const run = service(ca.roots);
    const nonce = randomBytes(32);
    const made = await hostileChainToken({
      length: 10,
      key: p384,
      nonce,
      sharedName: true,
      root: ca.root,
    });
    // a valid chain (the spec allows ten certificates): the top under the root, eight issuing
    // links, the leaf: nine links and the root's signature, each checked once
    expect(await run(made.token, nonce)).toMatchObject({ reason: 'accepted', checks: 10 });
    const again = randomBytes(32);
    const next = await hostileChainToken({
      length: 10,
      key: p384,
      nonce: again,
      sharedName: true,
      root: ca.root,
      issuing: made.chain.slice(1),
    });
    // the issuing part was remembered: a new leaf under it costs its own link only
    expect(await run(next.token, again)).toMatchObject({ reason: 'accepted', checks: 1 });
  });

  it('more than ten certificates: refused before any certificate is read', async () => {
    const run = service();
    const nonce = randomBytes(32);
    const { token } = await hostileChainToken({ length: 11, key: p384, nonce });
    expect(await run(token, nonce)).toMatchObject({ reason: 'token_malformed', checks: 0 });
  });

  it('a replayed hostile chain costs no signature the second time, whatever its leaf', async () => {
    const run = service();
    const nonce = randomBytes(32);
    const made = await hostileChainToken({ length: 10, key: p384, nonce });
    const first = await run(made.token, nonce);
    expect(first.reason).toBe('android_chain_invalid');
    expect(first.checks).toBeGreaterThan(0);
    expect(await run(made.token, nonce)).toMatchObject({
      reason: 'android_chain_invalid',
      checks: 0,
    });
    expect(await run(made.token, nonce)).toMatchObject({
      reason: 'android_chain_invalid',
      checks: 0,
    });
    // the issuing part failed: a new leaf under it is remembered as failing too
    const again = randomBytes(32);
    const next = await hostileChainToken({
      length: 10,
      key: p384,
      nonce: again,
      issuing: made.chain.slice(1),
    });
    expect(await run(next.token, again)).toMatchObject({
      reason: 'android_chain_invalid',
      checks: 0,
    });
  });

  it('a replayed chain whose leaf link fails under a configured root: no signature the second time', async () => {
    const run = service(ca.roots);
    const nonce = randomBytes(32);
    const made = await hostileChainToken({
      length: 6,
      key: p384,
      nonce,
      root: ca.root,
      badLeaf: true,
    });
    expect(await run(made.token, nonce)).toMatchObject({
      reason: 'android_chain_invalid',
      checks: 6,
    });
    expect(await run(made.token, nonce)).toMatchObject({
      reason: 'android_chain_invalid',
      checks: 0,
    });
  });
});

describe('the profile, checked before any signature (android_chain_invalid, no check)', () => {
  const cases: [string, () => Promise<HostileKey>, RegExp][] = [
    ['an RSA-1024 issuing key', () => rsaKey(1024), /RSA-1024/],
    [
      'an RSA-3072 issuing key with a 3,064-bit exponent',
      () => bigExponentKey(),
      /RSA-3072 with a public exponent of 3064 bits/,
    ],
    ['an RSA-8192 issuing key', () => rsaPublicKeyOnly(8192), /RSA-8192/],
    ['an RSA-2048 issuing key with exponent 3', () => rsaKey(2048, 3), /exponent of 2 bits \(3\)/],
    ['a P-521 issuing key', () => ecKey('P-521', 'SHA-512'), /secp521r1/],
    ['ECDSA with SHA-1', () => ecKey('P-256', 'SHA-1'), /algorithm 1\.2\.840\.10045\.4\.1/],
  ];
  // two certificates: the root signs the issuer whose key is to verify the leaf; three: the
  // same key also signs the certificate below it
  it.each(
    cases.flatMap(([name, make, detail]) => [2, 3].map((n) => [name, n, make, detail] as const)),
  )(
    '%s, in a chain of %i under a configured root',
    async (_name, length, make, detail) => {
      const run = service(ca.roots);
      const nonce = randomBytes(32);
      const { token } = await hostileChainToken({
        length,
        key: await make(),
        nonce,
        root: ca.root,
      });
      const outcome = await run(token, nonce);
      expect(outcome).toMatchObject({ reason: 'android_chain_invalid', checks: 0 });
      expect(outcome.detail).toMatch(detail);
      // and again: remembered
      expect(await run(token, nonce)).toMatchObject({ reason: 'android_chain_invalid', checks: 0 });
    },
    60_000,
  );

  it('a certificate over 8 KiB, or a chain over 24 KiB, is malformed before it is read', async () => {
    const run = service(ca.roots);
    const nonce = randomBytes(32);
    const big = await hostileChainToken({ length: 2, key: p384, nonce, padding: 9000 });
    expect(await run(big.token, nonce)).toMatchObject({
      reason: 'android_key_malformed',
      checks: 0,
    });
    const long = await hostileChainToken({ length: 5, key: p384, nonce, padding: 7000 });
    expect(await run(long.token, nonce)).toMatchObject({
      reason: 'android_key_malformed',
      checks: 0,
    });
  });

  it('a replayed AOSP software chain is still named as one, for no signature', async () => {
    const v = loadAndroidVectors().find(
      (x) => x.id === 'google-keyattestation-pixelxl-software-ec',
    )!;
    const run = service();
    const nonce = randomBytes(32);
    const token = vectorToken(v, nonce);
    const challenge = Buffer.from(v.challenge.base64, 'base64');
    const first = await run(token, nonce, new Date(v.verifyAt), challenge);
    expect(first).toMatchObject({ reason: 'android_chain_invalid', checks: 0 });
    expect(first.facts.chainRoot).toBe('aosp-software');
    const again = await run(token, nonce, new Date(v.verifyAt), challenge);
    expect(again).toMatchObject({
      reason: 'android_chain_invalid',
      checks: 0,
      detail: first.detail,
    });
    expect(again.facts.chainRoot).toBe('aosp-software');
  });

  it('the real chains are within it (test/fixtures/android-key)', async () => {
    for (const v of loadAndroidVectors()) {
      const run = service();
      const nonce = randomBytes(32);
      const outcome = await run(vectorToken(v, nonce), nonce);
      // a profile failure would name a key, an algorithm or a size
      expect(outcome.reason).not.toBe('android_key_malformed');
      expect(outcome.checks).toBeLessThanOrEqual(v.chain.length);
    }
  });
});
