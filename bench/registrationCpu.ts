/**
 * Server CPU per registration, in process:
 * `npx tsx bench/registrationCpu.ts [apple] [android] [receipt] [capture] [hostile] [--rounds N] [--per N] [--profile DIR]`.
 * Fresh keys under test CAs, as `npm run bench:http` sends them (intermediates repeat, leaves are
 * new, App Attest attestations carry the factory's unreadable "test receipt"), each token verified
 * once through verifyToken with in-memory stores; plus the real App Attest capture's receipt
 * checked alone (`receipt`) and the capture's whole registration with its valid receipt (`capture`),
 * or with hostile receipts in its place, against a garbage attestation (`hostile`).
 * Prints CPU time (process.cpuUsage: user + system, libuv threads included) per operation, the
 * median of the rounds after one warm-up round. `--profile DIR` writes a V8 profile of the measured
 * rounds only (not the minting) per scenario; `npx tsx bench/http/topFrames.ts FILE` lists its top
 * frames.
 */
import { randomBytes, X509Certificate } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { createAppleVerifier } from '../src/core/apple/appleVerifier.js';
import { defaultAppleRoots } from '../src/core/apple/trustRoots.js';
import { parseAttestationObject } from '../src/core/apple/verifyAttestation.js';
import { createReceiptVerifier, defaultReceiptRoots } from '../src/core/apple/verifyReceipt.js';
import { decodeStrictCbor } from '../src/core/cbor.js';
import { shippedRevocations } from '../src/core/androidKey/revocationList.js';
import {
  createMemoryAllowlist,
  createMemoryAndroidKeyStore,
  createMemoryAppleKeyStore,
} from '../src/core/memoryStores.js';
import { TraceRecorder } from '../src/core/trace.js';
import { buildVerifiers } from '../src/core/verifiers.js';
import { verifyToken } from '../src/core/verify.js';
import {
  androidKeyPolicy,
  androidRegistration,
  createAndroidTestCa,
  ANDROID_NOW,
} from '../test/support/androidFactory.js';
import {
  createAttestation,
  createDeviceKey,
  createTestCa,
  encodeAppleToken,
  encodeCbor,
  TEST_APP_ID,
} from '../test/support/appleFactory.js';
import {
  cycleReceipt,
  deepReceipt,
  emptySetsReceipt,
  fanOutReceipt,
  nameOf,
  receiptContent,
} from '../test/support/hostileReceipts.js';

const args = process.argv.slice(2);
const opt = (name: string, fallback: number) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const ROUNDS = opt('--rounds', 7);
const PER = opt('--per', 300);
const PROFILE_DIR = args.includes('--profile') ? args[args.indexOf('--profile') + 1]! : null;
const which = args.filter((a, i) => !a.startsWith('--') && !args[i - 1]?.startsWith('--'));
const scenarios = which.length > 0 ? which : ['apple', 'android', 'receipt', 'capture'];

/** CPU microseconds per call of `op(i)` over `per` calls, median of `rounds` (after one warm-up round). */
async function measure(
  name: string,
  op: (i: number) => Promise<void>,
  rounds = ROUNDS,
  per = PER,
): Promise<void> {
  let next = 0;
  const round = async () => {
    const start = process.cpuUsage();
    for (let i = 0; i < per; i++) await op(next++);
    const d = process.cpuUsage(start);
    return (d.user + d.system) / per;
  };
  await round(); // warm-up: JIT, caches
  const session = PROFILE_DIR ? new Session() : null;
  if (session) {
    session.connect();
    await session.post('Profiler.enable');
    await session.post('Profiler.start');
  }
  const results: number[] = [];
  for (let r = 0; r < rounds; r++) results.push(await round());
  if (session) {
    const { profile } = await session.post('Profiler.stop');
    const file = `${PROFILE_DIR}/${name.replace(/[^a-z0-9]+/gi, '-').slice(0, 60)}.cpuprofile`;
    writeFileSync(file, JSON.stringify(profile));
    session.disconnect();
    console.log(`profile: ${file}`);
  }
  results.sort((a, b) => a - b);
  const median = results[Math.floor(results.length / 2)]!;
  console.log(
    `${name}: ${(median / 1000).toFixed(3)} ms CPU per op (median of ${rounds} x ${per}; min ${(results[0]! / 1000).toFixed(3)}, max ${(results.at(-1)! / 1000).toFixed(3)})`,
  );
}

const reject = (outcome: Awaited<ReturnType<typeof verifyToken>>) => {
  if (!outcome.ok) throw new Error(`rejected: ${outcome.reason} ${outcome.detail}`);
};

if (scenarios.includes('apple')) {
  const ca = await createTestCa();
  const count = PER * (ROUNDS + 1);
  const now = Date.now();
  const HOUR = 3_600_000;
  const tokens: { token: Uint8Array; nonce: Uint8Array }[] = [];
  for (let i = 0; i < count; i++) {
    const device = await createDeviceKey();
    const nonce = randomBytes(32);
    const { attestation } = await createAttestation(ca, device, {
      nonce,
      leafValidity: { notBefore: new Date(now - HOUR), notAfter: new Date(now + 24 * HOUR) },
    });
    tokens.push({ token: encodeAppleToken({ nonce, keyId: device.keyId, attestation }), nonce });
  }
  const verifiers = buildVerifiers({
    allowlist: createMemoryAllowlist({ apple: [{ appId: TEST_APP_ID, env: 'production' }] }),
    appleKeys: createMemoryAppleKeyStore(),
    appleRoots: [new X509Certificate(ca.root.der)],
  });
  const deps = { now: () => new Date(), verifiers };
  await measure('App Attest registration (test CA, fresh leaf, "test receipt")', async (i) => {
    const t = tokens[i]!;
    reject(await verifyToken({ token: t.token, expectedNonce: t.nonce }, deps));
  });
}

if (scenarios.includes('android')) {
  const ca = await createAndroidTestCa();
  const count = PER * (ROUNDS + 1);
  const tokens: { token: Uint8Array; nonce: Uint8Array }[] = [];
  for (let i = 0; i < count; i++) {
    const nonce = randomBytes(32);
    tokens.push({ token: (await androidRegistration(ca, { nonce })).token, nonce });
  }
  const revocations = shippedRevocations().list;
  const verifiers = buildVerifiers({
    allowlist: createMemoryAllowlist({ android: [androidKeyPolicy()] }),
    appleKeys: createMemoryAppleKeyStore(),
    appleRoots: defaultAppleRoots(),
    android: {
      keys: createMemoryAndroidKeyStore(),
      roots: ca.roots,
      revocations: () => revocations,
    },
  });
  const deps = { now: () => ANDROID_NOW, verifiers };
  await measure('android-key registration (test CA, fresh leaf)', async (i) => {
    const t = tokens[i]!;
    reject(await verifyToken({ token: t.token, expectedNonce: t.nonce }, deps));
  });
}

interface Capture {
  appId: string;
  keyId: string;
  attestation: string;
  clientDataHash: string;
}
const capture = () =>
  JSON.parse(
    readFileSync(
      new URL('../test/fixtures/apple/veehaitch-ios-14.2.json', import.meta.url),
      'utf8',
    ),
  ) as Capture;
// a few seconds after the capture's receipt was created, so the receipt is valid
const CAPTURE_AT = new Date('2020-11-21T22:13:08Z');

if (scenarios.includes('receipt')) {
  const c = capture();
  const parsed = parseAttestationObject(Buffer.from(c.attestation, 'base64'));
  const receipts = createReceiptVerifier();
  await measure(
    'App Attest receipt check alone (real capture, CMS + fixed chain to G3)',
    async () => {
      const v = await receipts.verify(
        parsed.receipt!,
        { type: 'ATTEST', appId: c.appId, attestedCertificate: parsed.x5c[0]! },
        CAPTURE_AT,
      );
      if (!v.valid) throw new Error(v.problem);
    },
  );
}

if (scenarios.includes('capture')) {
  const c = capture();
  const keyId = Buffer.from(c.keyId, 'base64');
  const evidence = new Map<string, unknown>([
    ['keyId', keyId],
    ['attestation', Buffer.from(c.attestation, 'base64')],
  ]);
  const allowlist = createMemoryAllowlist({ apple: [{ appId: c.appId, env: 'any' }] });
  const keys = {
    find: async () => null,
    register: async () => true,
    raiseCounter: async () => false,
  };
  const ctx = () => ({
    nonce: Buffer.alloc(32),
    now: CAPTURE_AT,
    clientDataHash: Buffer.from(c.clientDataHash, 'base64'),
    trace: new TraceRecorder(),
  });
  const withReceipts = createAppleVerifier({ roots: defaultAppleRoots(), allowlist, keys });
  const without = createAppleVerifier({
    roots: defaultAppleRoots(),
    allowlist,
    keys,
    receipts: null,
  });
  const first = ctx();
  await withReceipts.verify(evidence, first);
  if (first.trace.facts.receipt !== 'valid') throw new Error('the capture receipt must be valid');
  await measure('App Attest registration, real capture, valid receipt checked', async () => {
    await withReceipts.verify(evidence, ctx());
  });
  await measure('App Attest registration, real capture, receipt unchecked', async () => {
    await without.verify(evidence, ctx());
  });
}

if (scenarios.includes('hostile')) {
  // The capture's attestation with its receipt (covered by no signature) replaced by a hostile
  // one whose content names the capture's key and App ID: everything before the receipt passes.
  const c = capture();
  const keyId = Buffer.from(c.keyId, 'base64');
  const attestation = Buffer.from(c.attestation, 'base64');
  const leaf = parseAttestationObject(attestation).x5c[0]!;
  const content = receiptContent(c.appId, leaf, new Date(CAPTURE_AT.getTime() - 5000));
  const withReceipt = (receipt: Uint8Array) => {
    const object = decodeStrictCbor(attestation, { maxDepth: 8, maxBytes: 64 * 1024 }) as Map<
      string,
      unknown
    >;
    (object.get('attStmt') as Map<string, unknown>).set('receipt', receipt);
    return new Map<string, unknown>([
      ['keyId', keyId],
      ['attestation', encodeCbor(object)],
    ]);
  };
  const keys = {
    find: async () => null,
    register: async () => true,
    raiseCounter: async () => false,
  };
  const verifier = createAppleVerifier({
    roots: defaultAppleRoots(),
    allowlist: createMemoryAllowlist({ apple: [{ appId: c.appId, env: 'any' }] }),
    keys,
  });
  const ctx = () => ({
    nonce: Buffer.alloc(32),
    now: CAPTURE_AT,
    clientDataHash: Buffer.from(c.clientDataHash, 'base64'),
    trace: new TraceRecorder(),
  });
  const cases: [string, Map<string, unknown>][] = [
    [
      'garbage attestation (64 random bytes)',
      new Map<string, unknown>([
        ['keyId', keyId],
        ['attestation', randomBytes(64)],
      ]),
    ],
    ['real capture, its valid receipt', withReceipt(parseAttestationObject(attestation).receipt!)],
    [
      'real capture, mutual-issuer cycle receipt',
      withReceipt(await cycleReceipt(leaf, undefined, content)),
    ],
    [
      "real capture, cycle receipt under Apple Root CA - G3's name (replayed)",
      withReceipt(await cycleReceipt(leaf, nameOf(defaultReceiptRoots()[0]!), content)),
    ],
    [
      'real capture, fan-out receipt (3 candidate issuers)',
      withReceipt(await fanOutReceipt(leaf, 3)),
    ],
    ['real capture, 9,990 empty SETs receipt', withReceipt(await emptySetsReceipt(leaf, 9990))],
    ['real capture, 5,000-deep receipt', withReceipt(await deepReceipt(leaf, 5000))],
  ];
  for (const [name, evidence] of cases)
    await measure(`App Attest registration, ${name}`, async () => {
      await verifier.verify(evidence, ctx()).catch(() => {});
    });
}
