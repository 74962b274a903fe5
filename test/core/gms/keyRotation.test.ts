import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createGoogleVerifier } from '../../../src/core/gms/googleVerifier.js';
import { KeyCache } from '../../../src/core/gms/keyCache.js';
import { createMemoryAllowlist } from '../../../src/core/memoryStores.js';
import type { AndroidPackagePolicy } from '../../../src/core/ports.js';
import {
  createGoogleTestKeys,
  googleEvidence,
  googlePolicy,
  keyPairOf,
  mintIntegrityToken,
  randomNonce,
  runVerifier,
  type GoogleTestKeys,
  type MintOptions,
} from '../../support/googleFactory.js';

const NOW = new Date('2026-03-01T12:00:00.000Z');
const nonce = randomNonce();
let oldKeys: GoogleTestKeys;
let newKeys: GoogleTestKeys;

beforeAll(async () => {
  oldKeys = await createGoogleTestKeys('2025-pair');
  newKeys = await createGoogleTestKeys('2026-pair');
});

afterEach(() => {
  vi.restoreAllMocks();
});

async function verifyWith(
  policy: AndroidPackagePolicy,
  mint: Partial<MintOptions> & { keys: GoogleTestKeys },
  keyCache?: KeyCache,
) {
  const verifier = createGoogleVerifier({
    allowlist: createMemoryAllowlist({ android: [policy] }),
    ...(keyCache ? { keyCache } : {}),
  });
  const token = await mintIntegrityToken({ nonce, now: NOW, ...mint });
  return runVerifier(verifier, googleEvidence(token), { nonce, now: NOW });
}

const reason = (run: Awaited<ReturnType<typeof verifyWith>>) => (run.ok ? 'accepted' : run.reason);

describe('key rotation', () => {
  it('accepts tokens of the old and the new pair during the rollover', async () => {
    const rollover = googlePolicy([oldKeys, newKeys]);
    const old = await verifyWith(rollover, { keys: oldKeys });
    const fresh = await verifyWith(rollover, { keys: newKeys });
    expect([reason(old), reason(fresh)]).toEqual(['accepted', 'accepted']);
    expect(fresh.checks.find((c) => c.id === 'gms.signature')?.detail).toContain('2026-pair');
  });

  it('rejects tokens of a retired pair', async () => {
    const retired = googlePolicy([newKeys]);
    expect(reason(await verifyWith(retired, { keys: oldKeys }))).toBe('gms_decrypt_failed');
    expect(reason(await verifyWith(retired, { keys: newKeys }))).toBe('accepted');
  });

  it('verifies with the verification key of the pair that decrypted, not any pair', async () => {
    // sealed with the old AES key, signed with the new EC key: both keys are allowlisted, but not as a pair
    const run = await verifyWith(googlePolicy([oldKeys, newKeys]), {
      keys: oldKeys,
      jws: { signWith: newKeys },
    });
    expect(reason(run)).toBe('gms_signature_invalid');
  });

  it('reports the furthest stage reached: a pair decrypted, so the signature failed', async () => {
    const stranger = await createGoogleTestKeys('stranger');
    // the first pair decrypts but its key does not verify; the second pair does not even decrypt
    const run = await verifyWith(googlePolicy([oldKeys, newKeys]), {
      keys: oldKeys,
      jws: { signWith: stranger },
    });
    expect(reason(run)).toBe('gms_signature_invalid');
    expect(run.checks.find((c) => c.id === 'gms.decrypt')?.status).toBe('pass');
  });

  it('keeps the other pairs working when one pair holds unusable key material', async () => {
    const broken = {
      id: 'broken',
      decryptionKey: new Uint8Array(16),
      verificationKey: new Uint8Array([1, 2, 3]),
    };
    const policy: AndroidPackagePolicy = {
      ...googlePolicy(newKeys),
      keys: [broken, keyPairOf(newKeys)],
    };
    expect(reason(await verifyWith(policy, { keys: newKeys }))).toBe('accepted');
    expect(reason(await verifyWith({ ...policy, keys: [broken] }, { keys: newKeys }))).toBe(
      'gms_decrypt_failed',
    );
  });

  it('rejects a pair whose verification key is unusable at the signature', async () => {
    const policy: AndroidPackagePolicy = {
      ...googlePolicy(newKeys),
      keys: [{ ...keyPairOf(newKeys), verificationKey: new Uint8Array(10) }],
    };
    expect(reason(await verifyWith(policy, { keys: newKeys }))).toBe('gms_signature_invalid');
  });
});

describe('key import cache', () => {
  function countImports() {
    const importKey = vi.spyOn(globalThis.crypto.subtle, 'importKey');
    return () => ({
      aesKw: importKey.mock.calls.filter(
        ([, , alg]) => (alg as { name?: string }).name === 'AES-KW',
      ).length,
      spki: importKey.mock.calls.filter(([format]) => format === 'spki').length,
    });
  }

  it('imports each key once, not per request', async () => {
    const tokens = await Promise.all(
      [oldKeys, newKeys, oldKeys, newKeys, oldKeys, newKeys].map((keys) =>
        mintIntegrityToken({ keys, nonce, now: NOW }),
      ),
    );
    const imports = countImports(); // after minting, which imports keys of its own
    const verifier = createGoogleVerifier({
      allowlist: createMemoryAllowlist({ android: [googlePolicy([oldKeys, newKeys])] }),
    });
    for (const token of tokens) {
      const run = await runVerifier(verifier, googleEvidence(token), { nonce, now: NOW });
      expect(run.ok).toBe(true);
    }
    expect(imports()).toEqual({ aesKw: 2, spki: 2 });
  });

  it('imports afresh when a pair id comes back with other key material', async () => {
    const cache = new KeyCache();
    expect(reason(await verifyWith(googlePolicy(oldKeys), { keys: oldKeys }, cache))).toBe(
      'accepted',
    );
    const reissued = { ...newKeys, id: oldKeys.id };
    expect(reason(await verifyWith(googlePolicy(reissued), { keys: reissued }, cache))).toBe(
      'accepted',
    );
    expect(reason(await verifyWith(googlePolicy(reissued), { keys: oldKeys }, cache))).toBe(
      'gms_decrypt_failed',
    );
    expect(cache.size).toBe(2);
  });

  it('stays within its bound, dropping the least recently used pair', async () => {
    const cache = new KeyCache(2);
    const [a, b, c] = [
      keyPairOf(oldKeys),
      keyPairOf(newKeys),
      keyPairOf(await createGoogleTestKeys('third')),
    ];
    const first = await cache.get(a);
    await cache.get(b);
    expect(await cache.get(a)).toBe(first); // a is now the most recently used
    await cache.get(c); // evicts b
    expect(cache.size).toBe(2);
    expect(await cache.get(a)).toBe(first);
    const imports = countImports();
    await cache.get(b);
    expect(imports().aesKw).toBe(1);
  });

  it('refuses a bound below 1', () => {
    expect(() => new KeyCache(0)).toThrow(RangeError);
  });
});
