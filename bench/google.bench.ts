/**
 * Play Integrity verification cost per token: with the key cache warm (the steady state), cold
 * (every key imported again, what the cache saves), and with a package mid-rotation.
 * Run: npx vitest bench --run --project shared bench/google.bench.ts
 */
import { Encoder } from 'cbor-x';
import { bench as vitestBench, describe } from 'vitest';
import { createGoogleVerifier } from '../src/core/gms/googleVerifier.js';
import { KeyCache } from '../src/core/gms/keyCache.js';
import { createMemoryAllowlist } from '../src/core/memoryStores.js';
import { TraceRecorder } from '../src/core/trace.js';
import { verifyToken } from '../src/core/verify.js';
import {
  TEST_PACKAGE,
  createGoogleTestKeys,
  googleEvidence,
  googlePolicy,
  mintIntegrityToken,
  randomNonce,
} from '../test/support/googleFactory.js';

// longer runs than the default: single-digit-millisecond outliers (GC, the libuv pool) are common
const bench = (name: string, fn: () => Promise<void>) =>
  vitestBench(name, fn, { time: 3000, warmupTime: 500 });

const now = new Date();
const nonce = randomNonce();
const [current, older, oldest, stranger] = await Promise.all(
  ['current', 'older', 'oldest', 'stranger'].map((id) => createGoogleTestKeys(id)),
);
const allowlist = createMemoryAllowlist({ android: [googlePolicy(current!)] });
const rotating = createMemoryAllowlist({ android: [googlePolicy([oldest!, older!, current!])] });

const evidence = googleEvidence(await mintIntegrityToken({ keys: current!, nonce, now }));
const evidenceOldest = googleEvidence(await mintIntegrityToken({ keys: oldest!, nonce, now }));
const foreign = googleEvidence(await mintIntegrityToken({ keys: stranger!, nonce, now }));
const cborToken = new Uint8Array(
  new Encoder({ useRecords: false, tagUint8Array: false }).encode({
    v: 1,
    nonce,
    device: { service: 'gms' },
    gms: { packageName: TEST_PACKAGE, integrityToken: evidence.get('integrityToken') },
  }),
);

const warm = createGoogleVerifier({ allowlist });
const warmRotating = createGoogleVerifier({ allowlist: rotating });
const ctx = () => ({ nonce, now, trace: new TraceRecorder() });

async function mustPass(p: Promise<unknown>): Promise<void> {
  await p; // a Rejection would throw and fail the bench
}

describe('gms verifier, one token', () => {
  bench('warm key cache', async () => {
    await mustPass(warm.verify(evidence, ctx()));
  });

  bench('cold key cache (keys imported per token)', async () => {
    await mustPass(
      createGoogleVerifier({ allowlist, keyCache: new KeyCache() }).verify(evidence, ctx()),
    );
  });

  bench('warm, 3 key pairs, token from the newest pair', async () => {
    await mustPass(warmRotating.verify(evidence, ctx()));
  });

  bench('warm, 3 key pairs, token from the oldest pair', async () => {
    await mustPass(warmRotating.verify(evidenceOldest, ctx()));
  });

  bench('warm, rejected: sealed with unknown keys', async () => {
    await warm.verify(foreign, ctx()).catch(() => undefined);
  });
});

describe('verifyToken end to end (CBOR envelope + gms), warm', () => {
  const deps = { now: () => now, verifiers: { gms: warm } };
  bench('valid token', async () => {
    const outcome = await verifyToken({ token: cborToken, expectedNonce: nonce }, deps);
    if (!outcome.ok) throw new Error(outcome.reason);
  });
});
