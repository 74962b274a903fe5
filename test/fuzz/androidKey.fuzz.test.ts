/**
 * Property-based fuzzing of the android-key path: the KeyDescription decoder, the attestation
 * certificate reader and `verifyToken` end to end, fed with mutations of real chains
 * (test/fixtures/android-key): bit flips, truncation, inserted and overwritten bytes, huge
 * declared ASN.1 lengths and deep nesting.
 *
 * Properties: nothing throws but `Rejection` (a thrown fault is a 500 in the service); a mutated
 * registration is accepted only when its certificate chain, keyId and package are unchanged;
 * each input finishes within a bound far above its normal cost. Chains assembled from hostile
 * issuers (a big RSA exponent, a fan-out of one name and key; test/support/hostileAndroidChains.ts)
 * and real ones cost at most one signature check per link plus two root tries, and no signature
 * is ever checked with a key outside the profile.
 *
 * Seeded and small by default; a longer run: FUZZ_RUNS=20000 npx vitest run test/fuzz
 */
import { randomBytes, X509Certificate, type KeyObject } from 'node:crypto';
import fc from 'fast-check';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { readAttestationCertificate } from '../../src/core/androidKey/attestationCertificate.js';
import {
  KEY_DESCRIPTION_OID,
  parseKeyDescription,
} from '../../src/core/androidKey/keyDescription.js';
import { revocationListOf } from '../../src/core/androidKey/revocationList.js';
import { aospSoftwareRoots, defaultAndroidRoots } from '../../src/core/androidKey/trustRoots.js';
import { defaultAppleRoots } from '../../src/core/apple/trustRoots.js';
import { decodeStrictCbor } from '../../src/core/cbor.js';
import {
  createMemoryAllowlist,
  createMemoryAndroidKeyStore,
  createMemoryAppleKeyStore,
} from '../../src/core/memoryStores.js';
import { Rejection } from '../../src/core/reasons.js';
import { buildVerifiers } from '../../src/core/verifiers.js';
import { TOKEN_MAX_BYTES, TOKEN_MAX_DEPTH } from '../../src/core/envelope.js';
import { verifyToken } from '../../src/core/verify.js';
import { encodeAndroidKeyToken } from '../../src/core/androidKey/androidKeyToken.js';
import { ANDROID_NOW, ANDROID_PACKAGE, androidKeyPolicy } from '../support/androidFactory.js';
import {
  loadAndroidVectors,
  vectorPolicy,
  vectorToken,
  type AndroidVector,
} from '../support/androidVectors.js';
import { bigExponentKey, ecKey, hostileChainToken } from '../support/hostileAndroidChains.js';

const RUNS = Number(process.env.FUZZ_RUNS ?? 0) || undefined;
const SEED = Number(process.env.FUZZ_SEED ?? 20261125);
const params = (runs: number) => ({ seed: SEED, numRuns: RUNS ?? runs, endOnFailure: true });
const BOUND_MS = 2_000;
const LONG_RUN_TIMEOUT = RUNS === undefined ? 60_000 : 3_600_000;

type Mutation =
  | { op: 'flip'; at: number; bit: number }
  | { op: 'truncate'; at: number }
  | { op: 'insert'; at: number; bytes: Uint8Array }
  | { op: 'overwrite'; at: number; bytes: Uint8Array }
  | { op: 'hugeLength'; at: number }
  | { op: 'nest'; depth: number };

const at = fc.nat({ max: 20_000 });
const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ op: fc.constant('flip' as const), at, bit: fc.nat({ max: 7 }) }),
  fc.record({ op: fc.constant('truncate' as const), at }),
  fc.record({
    op: fc.constant('insert' as const),
    at,
    bytes: fc.uint8Array({ minLength: 1, maxLength: 8 }),
  }),
  fc.record({
    op: fc.constant('overwrite' as const),
    at,
    bytes: fc.uint8Array({ minLength: 1, maxLength: 8 }),
  }),
  fc.record({ op: fc.constant('hugeLength' as const), at }),
  fc.record({ op: fc.constant('nest' as const), depth: fc.integer({ min: 1, max: 5000 }) }),
);
const mutations = fc.array(mutation, { minLength: 1, maxLength: 3 });

function mutate(bytes: Uint8Array, m: Mutation): Uint8Array {
  const b = Buffer.from(bytes);
  const i = b.length === 0 ? 0 : m.op === 'nest' ? 0 : m.at % b.length;
  switch (m.op) {
    case 'flip':
      if (b.length) b[i]! ^= 1 << m.bit;
      return b;
    case 'truncate':
      return b.subarray(0, i);
    case 'insert':
      return Buffer.concat([b.subarray(0, i), m.bytes, b.subarray(i)]);
    case 'overwrite':
      return Buffer.concat([b.subarray(0, i), m.bytes, b.subarray(i + m.bytes.length)]);
    case 'hugeLength':
      // a long-form length claiming 2^31 bytes at an arbitrary position
      return Buffer.concat([
        b.subarray(0, i),
        Buffer.from([0x84, 0x7f, 0xff, 0xff, 0xff]),
        b.subarray(i + 1),
      ]);
    case 'nest':
      // SEQUENCE { SEQUENCE { ... } } far deeper than any KeyDescription
      return Buffer.concat([Buffer.alloc(m.depth * 2, 0).map((_, k) => (k % 2 ? 0x80 : 0x30)), b]);
  }
}
const applyAll = (bytes: Uint8Array, ms: Mutation[]) => ms.reduce(mutate, bytes);

async function bounded(work: () => unknown, allowed: readonly (new (...a: never[]) => Error)[]) {
  const started = performance.now();
  let result: unknown;
  try {
    result = await work();
  } catch (err) {
    if (!allowed.some((type) => err instanceof type))
      throw new Error(`a fault, not a rejection: ${String((err as Error)?.stack ?? err)}`);
  }
  const elapsed = performance.now() - started;
  if (elapsed > BOUND_MS) throw new Error(`took ${elapsed.toFixed(0)} ms`);
  return result;
}

const vectors = loadAndroidVectors().filter((v) =>
  [
    'google-keyattestation-pixel9a-tee-ec-2026-root',
    'google-keyattestation-pixel3-strongbox-rsa',
    'google-keyattestation-invalid-malformed-devicelocked',
    'multipaz-pixel7a-tee-rkp',
  ].includes(v.id),
);
const leaves = vectors.map((v) => Buffer.from(v.chain[0]!, 'base64'));
const descriptions = leaves.map(
  (der) => readAttestationCertificate(der, 'leaf').extensions.get(KEY_DESCRIPTION_OID)![0]!,
);

function verifierFor(v: AndroidVector) {
  const verifiers = buildVerifiers({
    allowlist: createMemoryAllowlist({ android: [vectorPolicy(v)] }),
    appleKeys: createMemoryAppleKeyStore(),
    appleRoots: defaultAppleRoots(),
    android: {
      keys: createMemoryAndroidKeyStore(),
      roots: defaultAndroidRoots(),
      revocations: () => revocationListOf(new Map()),
    },
  });
  return (token: Uint8Array, nonce: Uint8Array) =>
    verifyToken(
      { token, expectedNonce: nonce, challenge: Buffer.from(v.challenge.base64, 'base64') },
      { now: () => new Date(v.verifyAt), verifiers },
    );
}

/** What must be unchanged for a mutated registration to be accepted. */
function significant(token: Uint8Array): string | null {
  try {
    const root = decodeStrictCbor(token, { maxBytes: TOKEN_MAX_BYTES, maxDepth: TOKEN_MAX_DEPTH });
    const evidence = (root as Map<string, unknown>).get('android-key') as Map<string, unknown>;
    const chain = (evidence.get('certificateChain') as Uint8Array[]).map((c) =>
      Buffer.from(c).toString('hex'),
    );
    return JSON.stringify([
      chain,
      Buffer.from(evidence.get('keyId') as Uint8Array).toString('hex'),
      evidence.get('packageName'),
    ]);
  } catch {
    return null;
  }
}

describe('fuzz: android-key', () => {
  it(
    'the KeyDescription decoder only ever rejects',
    async () => {
      await fc.assert(
        fc.asyncProperty(fc.nat({ max: descriptions.length - 1 }), mutations, async (i, ms) => {
          await bounded(() => parseKeyDescription(applyAll(descriptions[i]!, ms)), [Rejection]);
        }),
        params(400),
      );
      fc.assert(
        fc.property(fc.uint8Array({ maxLength: 512 }), (bytes) => {
          try {
            parseKeyDescription(bytes);
          } catch (err) {
            expect(err).toBeInstanceOf(Rejection);
          }
        }),
        params(400),
      );
    },
    LONG_RUN_TIMEOUT,
  );

  it(
    'the certificate reader only ever rejects',
    async () => {
      await fc.assert(
        fc.asyncProperty(fc.nat({ max: leaves.length - 1 }), mutations, async (i, ms) => {
          await bounded(
            () => readAttestationCertificate(applyAll(leaves[i]!, ms), 'leaf'),
            [Rejection],
          );
        }),
        params(300),
      );
    },
    LONG_RUN_TIMEOUT,
  );

  it.each(vectors.map((v) => [v.id, v] as const))(
    '%s: mutated registrations never fault, and pass only with chain, keyId and package intact',
    async (_id, v) => {
      const run = verifierFor(v);
      const nonce = randomBytes(32);
      const original = vectorToken(v, nonce);
      const seed = await run(original, nonce);
      expect(seed.ok ? 'valid' : seed.reason).toBe('valid');
      const fingerprint = significant(original);
      await fc.assert(
        fc.asyncProperty(mutations, async (ms) => {
          const token = applyAll(original, ms);
          const outcome = (await bounded(() => run(token, nonce), [])) as Awaited<
            ReturnType<typeof verifyToken>
          >;
          if (outcome?.ok) expect(significant(token)).toBe(fingerprint);
        }),
        params(60),
      );
    },
    LONG_RUN_TIMEOUT,
  );
});

describe('fuzz: hostile android-key chains (big exponent, fan-out, real issuers mixed in)', () => {
  let leaves: Uint8Array[];
  let pool: Uint8Array[];
  const nonce = randomBytes(32);
  beforeAll(async () => {
    const big = await hostileChainToken({ length: 4, key: await bigExponentKey(), nonce });
    const fan = await hostileChainToken({
      length: 4,
      key: await ecKey('P-384'),
      nonce,
      sharedName: true,
    });
    const real = vectors.flatMap((v) =>
      v.chain.map((c) => new Uint8Array(Buffer.from(c, 'base64'))),
    );
    leaves = [big.chain[0]!, fan.chain[0]!, real[0]!];
    pool = [...big.chain.slice(1), ...fan.chain.slice(1), ...real];
  }, 120_000);

  it(
    'a chain of up to ten pooled certificates: rejected, within a signature-check bound, never with a key out of profile',
    async () => {
      const verifiers = () =>
        buildVerifiers({
          allowlist: createMemoryAllowlist({ android: [androidKeyPolicy()] }),
          appleKeys: createMemoryAppleKeyStore(),
          appleRoots: defaultAppleRoots(),
          android: {
            keys: createMemoryAndroidKeyStore(),
            roots: defaultAndroidRoots(),
            revocations: () => revocationListOf(new Map()),
          },
        });
      // the root keys are known ones (the AOSP RSA root is RSA-1024, tried only to name it)
      const known = [...defaultAndroidRoots(), ...aospSoftwareRoots()].map((r) => r.spki);
      const inProfile = (key: KeyObject) => {
        const spki = key.export({ type: 'spki', format: 'der' });
        if (known.some((k) => k.equals(spki))) return true;
        const d = key.asymmetricKeyDetails ?? {};
        return key.asymmetricKeyType === 'ec'
          ? ['prime256v1', 'secp384r1'].includes(d.namedCurve ?? '')
          : key.asymmetricKeyType === 'rsa' &&
              d.publicExponent === 65537n &&
              (d.modulusLength ?? 0) >= 2048 &&
              (d.modulusLength ?? 0) <= 4096;
      };
      await fc.assert(
        fc.asyncProperty(
          fc.nat({ max: 2 }),
          fc.array(fc.nat({ max: 1000 }), { minLength: 0, maxLength: 9 }),
          async (leaf, picks) => {
            const chain = [leaves[leaf]!, ...picks.map((i) => pool[i % pool.length]!)];
            const token = encodeAndroidKeyToken({
              nonce,
              packageName: ANDROID_PACKAGE,
              keyId: new Uint8Array(32),
              certificateChain: chain,
            });
            const spy = vi.spyOn(X509Certificate.prototype, 'verify');
            try {
              const outcome = (await bounded(
                () =>
                  verifyToken(
                    { token, expectedNonce: nonce },
                    { now: () => ANDROID_NOW, verifiers: verifiers() },
                  ),
                [],
              )) as Awaited<ReturnType<typeof verifyToken>>;
              expect(outcome.ok).toBe(false);
              expect(spy.mock.calls.length).toBeLessThanOrEqual(chain.length + 1);
              for (const [key] of spy.mock.calls) expect(inProfile(key as KeyObject)).toBe(true);
            } finally {
              spy.mockRestore();
            }
          },
        ),
        params(80),
      );
    },
    LONG_RUN_TIMEOUT,
  );
});
