/**
 * CPU per android-key request, in process, for hostile chains against a garbage token and real
 * chains (issue 28, item 2): `npx tsx bench/androidChainCpu.ts [--rounds N] [--per N]`.
 * Scenarios: a garbage token (random bytes), an android-key token whose two certificates are random
 * bytes; the big-exponent chain (ten certificates, nine issuers
 * sharing an RSA-3072 key with a 3,064-bit exponent) replayed as one body, and made fresh for every
 * request (a new leaf, so nothing matches a remembered digest); a fan-out chain (nine issuers with
 * one name and one P-384 key) replayed; a real registration (the Pixel 9a TEE chain to Key
 * Attestation CA1, and the Pixel 8a chain to the RSA-4096 root) on a warm verifier, and the same
 * on a cold verifier (every signature of the chain checked). Each request runs verifyToken with
 * in-memory stores; CPU time is process.cpuUsage (user + system) per request, the median of the
 * rounds after one warm-up round.
 */
import { randomBytes } from 'node:crypto';
import { shippedRevocations } from '../src/core/androidKey/revocationList.js';
import { defaultAndroidRoots } from '../src/core/androidKey/trustRoots.js';
import { defaultAppleRoots } from '../src/core/apple/trustRoots.js';
import {
  createMemoryAllowlist,
  createMemoryAndroidKeyStore,
  createMemoryAppleKeyStore,
} from '../src/core/memoryStores.js';
import type { AndroidKeyStore, AndroidPackagePolicy } from '../src/core/ports.js';
import { buildVerifiers } from '../src/core/verifiers.js';
import { verifyToken } from '../src/core/verify.js';
import { encodeAndroidKeyToken } from '../src/core/androidKey/androidKeyToken.js';
import { ANDROID_NOW, androidKeyPolicy } from '../test/support/androidFactory.js';
import {
  loadAndroidVectors,
  vectorPolicy,
  vectorToken,
  type AndroidVector,
} from '../test/support/androidVectors.js';
import { bigExponentKey, ecKey, hostileChainToken } from '../test/support/hostileAndroidChains.js';

const args = process.argv.slice(2);
const opt = (name: string, fallback: number) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const ROUNDS = opt('--rounds', 5);
const PER = opt('--per', 40);

async function measure(name: string, op: (i: number) => Promise<unknown>): Promise<number> {
  let next = 0;
  const round = async () => {
    const start = process.cpuUsage();
    for (let i = 0; i < PER; i++) await op(next++);
    const d = process.cpuUsage(start);
    return (d.user + d.system) / PER;
  };
  await round();
  const results: number[] = [];
  for (let r = 0; r < ROUNDS; r++) results.push(await round());
  results.sort((a, b) => a - b);
  const median = results[Math.floor(results.length / 2)]! / 1000;
  console.log(`${name}: ${median.toFixed(3)} ms CPU per request (median of ${ROUNDS} x ${PER})`);
  return median;
}

/** A key store that never keeps a key, so one real chain registers again and again. */
const forgetful = (): AndroidKeyStore => ({
  ...createMemoryAndroidKeyStore(),
  find: async () => null,
  register: async () => true,
});

function verifiersFor(policies: AndroidPackagePolicy[]) {
  return buildVerifiers({
    allowlist: createMemoryAllowlist({ android: policies }),
    appleKeys: createMemoryAppleKeyStore(),
    appleRoots: defaultAppleRoots(),
    android: {
      keys: forgetful(),
      roots: defaultAndroidRoots(),
      revocations: () => shippedRevocations().list,
    },
  });
}

const expect = (want: string) => (outcome: Awaited<ReturnType<typeof verifyToken>>) => {
  const got = outcome.ok ? 'accepted' : outcome.reason;
  if (got !== want)
    throw new Error(`expected ${want}, got ${got}: ${outcome.ok ? '' : outcome.detail}`);
};

const hostileVerifiers = verifiersFor([androidKeyPolicy()]);
const at = { now: () => ANDROID_NOW, verifiers: hostileVerifiers };

const garbage = randomBytes(16_800);
const garbageCpu = await measure('garbage token (16.8 KB of random bytes)', async () =>
  expect('token_malformed')(
    await verifyToken({ token: garbage, expectedNonce: randomBytes(32) }, at),
  ),
);

const junkNonce = randomBytes(32);
const junk = encodeAndroidKeyToken({
  nonce: junkNonce,
  packageName: 'com.example.attest',
  keyId: randomBytes(32),
  certificateChain: [randomBytes(6_800), randomBytes(6_800)],
});
const junkCpu = await measure(
  'android-key token whose chain is 13.6 KB of random bytes',
  async () =>
    expect('android_key_malformed')(
      await verifyToken({ token: junk, expectedNonce: junkNonce }, at),
    ),
);

const bigRsa = await bigExponentKey();
const nonce = randomBytes(32);
const big = await hostileChainToken({ length: 10, key: bigRsa, nonce });
console.log(`big-exponent chain: ${big.token.length} bytes`);
const bigCpu = await measure('big-exponent chain, the same body replayed', async () =>
  expect('android_chain_invalid')(
    await verifyToken({ token: big.token, expectedNonce: nonce }, at),
  ),
);
// fresh leaves under the same issuers: nothing is replayed byte for byte
const fresh = await Promise.all(
  Array.from({ length: PER * (ROUNDS + 1) }, async () => {
    const n = randomBytes(32);
    return {
      nonce: n,
      token: (
        await hostileChainToken({ length: 10, key: bigRsa, nonce: n, issuing: big.chain.slice(1) })
      ).token,
    };
  }),
);
const freshCpu = await measure('big-exponent chain, a new leaf every request', async (i) => {
  const t = fresh[i]!;
  expect('android_chain_invalid')(
    await verifyToken({ token: t.token, expectedNonce: t.nonce }, at),
  );
});
const fan = await hostileChainToken({
  length: 10,
  key: await ecKey('P-384'),
  nonce,
  sharedName: true,
});
const fanCpu = await measure('fan-out chain (P-384), the same body replayed', async () =>
  expect('android_chain_invalid')(
    await verifyToken({ token: fan.token, expectedNonce: nonce }, at),
  ),
);

const vectors = loadAndroidVectors();
for (const id of [
  'google-keyattestation-pixel9a-tee-ec-2026-root',
  'google-keyattestation-pixel8a-tee-ec',
]) {
  const v = vectors.find((x) => x.id === id) as AndroidVector;
  const challenge = Buffer.from(v.challenge.base64, 'base64');
  const warm = verifiersFor([vectorPolicy(v)]);
  const n = randomBytes(32);
  const token = vectorToken(v, n);
  const run = (verifiers: ReturnType<typeof verifiersFor>) =>
    verifyToken(
      { token, expectedNonce: n, challenge },
      { now: () => new Date(v.verifyAt), verifiers },
    );
  await measure(`real registration ${id}, warm verifier`, async () =>
    expect('accepted')(await run(warm)),
  );
  await measure(`real registration ${id}, cold verifier (whole chain)`, async () =>
    expect('accepted')(await run(verifiersFor([vectorPolicy(v)]))),
  );
}
for (const [name, base] of [
  ['the garbage token', garbageCpu],
  ['the garbage android-key chain', junkCpu],
] as const)
  console.log(
    `ratios to ${name}: big-exponent replayed ${(bigCpu / base).toFixed(1)}x, new leaf ${(freshCpu / base).toFixed(1)}x, fan-out ${(fanCpu / base).toFixed(1)}x`,
  );
