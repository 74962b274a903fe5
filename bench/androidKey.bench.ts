/**
 * Android key attestation verification cost, per operation, on real chains (test/fixtures/android-key)
 * and a simulated key for assertions, with stores that answer at once, so the numbers are the
 * verifier's own: `npx vitest bench --run --project shared bench/androidKey.bench.ts`.
 * Every scenario is run once when the file loads, where a rejection fails it.
 */
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { bench, describe } from 'vitest';
import { createAndroidKeyVerifier } from '../src/core/androidKey/androidKeyVerifier.js';
import { shippedRevocations } from '../src/core/androidKey/revocationList.js';
import { defaultAndroidRoots } from '../src/core/androidKey/trustRoots.js';
import { createAndroidDeviceKey, signAndroidAssertion } from '../src/core/dev/androidKeyMint.js';
import { DEFAULT_ANDROID_POLICY } from '../src/core/gms/defaultAndroidPolicy.js';
import { createMemoryAllowlist } from '../src/core/memoryStores.js';
import { TraceRecorder } from '../src/core/trace.js';
import type { AndroidKeyRecord, AndroidKeyStore } from '../src/core/ports.js';

interface Vector {
  chain: string[];
  verifyAt: string;
  challenge: { base64: string };
  leafPublicKey: string;
  keyDescription: {
    softwareEnforced: { attestationApplicationId: { packages: { name: string }[] } };
  };
}
const load = (name: string) =>
  JSON.parse(
    readFileSync(new URL(`../test/fixtures/android-key/${name}.json`, import.meta.url), 'utf8'),
  ) as Vector;

const PACKAGE = 'com.google.android.attestation';
const allowlist = createMemoryAllowlist({
  android: [{ ...DEFAULT_ANDROID_POLICY, packageName: PACKAGE, keys: [], keyAttestation: true }],
});
const revocations = () => shippedRevocations().list;
const roots = defaultAndroidRoots();

// ---- registration: real chains, a P-256 leaf under an RSA-4096 root and under CA1 (P-384) ----
const unknownKey: AndroidKeyStore = { find: async () => null, register: async () => true };
function registration(name: string) {
  const v = load(name);
  const evidence = new Map<string, unknown>([
    ['packageName', PACKAGE],
    ['keyId', createHash('sha256').update(Buffer.from(v.leafPublicKey, 'base64')).digest()],
    ['certificateChain', v.chain.map((c) => Buffer.from(c, 'base64'))],
  ]);
  const ctx = () => ({
    nonce: Buffer.alloc(32),
    now: new Date(v.verifyAt),
    challenge: Buffer.from(v.challenge.base64, 'base64'),
    trace: new TraceRecorder(),
  });
  return { evidence, ctx };
}
const rsaRoot = registration('google-keyattestation-pixel9pro-tee-ec-rkp');
const ecRoot = registration('google-keyattestation-pixel9a-tee-ec-2026-root');
const warm = createAndroidKeyVerifier({ roots, allowlist, keys: unknownKey, revocations });

// ---- assertion: a registered P-256 key and an RSA-2048 one ----
function assertion(rsaBits?: number) {
  const device = createAndroidDeviceKey(rsaBits ? { rsaBits } : {});
  const record: AndroidKeyRecord = {
    keyId: device.keyId,
    publicKey: device.spki,
    packageName: PACKAGE,
    attestationSecurityLevel: 'TrustedEnvironment',
    keyMintSecurityLevel: 'TrustedEnvironment',
    verifiedBootState: 'Verified',
    deviceLocked: true,
    verifiedBootKey: new Uint8Array(32),
    osPatchLevel: 202611,
    attestationVersion: 300,
    signatureDigests: [],
  };
  const nonce = randomBytes(32);
  const evidence = new Map<string, unknown>([
    ['packageName', PACKAGE],
    ['keyId', Buffer.from(device.keyId)],
    ['signature', Buffer.from(signAndroidAssertion(device, nonce))],
  ]);
  const keys: AndroidKeyStore = { find: async () => record, register: async () => false };
  const verifier = createAndroidKeyVerifier({ roots, allowlist, keys, revocations });
  const ctx = () => ({ nonce, now: new Date(), trace: new TraceRecorder() });
  return { verifier, evidence, ctx };
}
const ec = assertion();
const rsa = assertion(2048);

await warm.verify(rsaRoot.evidence, rsaRoot.ctx());
await warm.verify(ecRoot.evidence, ecRoot.ctx());
await ec.verifier.verify(ec.evidence, ec.ctx());
await rsa.verifier.verify(rsa.evidence, rsa.ctx());

describe('android-key registration', () => {
  bench(
    'registration, RSA-4096 root, cold chain cache',
    async () => {
      await createAndroidKeyVerifier({ roots, allowlist, keys: unknownKey, revocations }).verify(
        rsaRoot.evidence,
        rsaRoot.ctx(),
      );
    },
    { time: 2000 },
  );
  bench(
    'registration, RSA-4096 root, warm chain cache',
    async () => {
      await warm.verify(rsaRoot.evidence, rsaRoot.ctx());
    },
    { time: 2000 },
  );
  bench(
    'registration, Key Attestation CA1 (P-384) root, warm chain cache',
    async () => {
      await warm.verify(ecRoot.evidence, ecRoot.ctx());
    },
    { time: 2000 },
  );
});

describe('android-key assertion', () => {
  bench(
    'assertion, P-256 key (warm key cache)',
    async () => {
      await ec.verifier.verify(ec.evidence, ec.ctx());
    },
    { time: 2000 },
  );
  bench(
    'assertion, RSA-2048 key (warm key cache)',
    async () => {
      await rsa.verifier.verify(rsa.evidence, rsa.ctx());
    },
    { time: 2000 },
  );
});
