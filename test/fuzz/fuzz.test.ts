/**
 * Property-based fuzzing of everything a token passes through: the strict CBOR decoder, the App
 * Attest object parsers, the JWE/JWS opening and `verifyToken` end to end, fed with mutations of
 * real App Attest captures (test/fixtures/apple) and factory-made Play Integrity tokens: bit
 * flips, truncation, inserted and overwritten bytes, huge declared lengths, deep nesting,
 * duplicated, reordered and retyped map entries.
 *
 * Properties: nothing throws but the expected rejection types (a thrown fault is a 500 in the
 * service); a mutated valid token is accepted only when every security-relevant field is
 * unchanged (reordered keys, an edited receipt Apple signs nothing over); each input finishes
 * within a bound far above its normal cost (a guard against pathological inputs, not a benchmark).
 *
 * Seeded and small by default, so the suite stays fast; a longer run:
 *   FUZZ_RUNS=20000 npx vitest run test/fuzz            (FUZZ_SEED=n for another seed)
 */
import { createPublicKey } from 'node:crypto';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { createAppleVerifier } from '../../src/core/apple/appleVerifier.js';
import { parseAuthenticatorData } from '../../src/core/apple/authenticatorData.js';
import { defaultAppleRoots } from '../../src/core/apple/trustRoots.js';
import { parseAssertionObject } from '../../src/core/apple/verifyAssertion.js';
import { parseAttestationObject } from '../../src/core/apple/verifyAttestation.js';
import { createReceiptVerifier, type ReceiptVerdict } from '../../src/core/apple/verifyReceipt.js';
import type { ReceiptFacts } from '../../src/core/apple/receiptStructure.js';
import { CborError, decodeStrictCbor, isBytes, isMap } from '../../src/core/cbor.js';
import { createGoogleVerifier } from '../../src/core/gms/googleVerifier.js';
import { KeyCache } from '../../src/core/gms/keyCache.js';
import { openIntegrityToken } from '../../src/core/gms/openIntegrityToken.js';
import { createMemoryAllowlist, createMemoryAppleKeyStore } from '../../src/core/memoryStores.js';
import { Rejection } from '../../src/core/reasons.js';
import type { PlatformVerifier } from '../../src/core/ports.js';
import { TOKEN_MAX_BYTES, TOKEN_MAX_DEPTH } from '../../src/core/envelope.js';
import { verifyToken } from '../../src/core/verify.js';
import { encodeCbor } from '../support/appleFactory.js';
import {
  createGoogleTestKeys,
  googlePolicy,
  keyPairOf,
  mintIntegrityToken,
  randomNonce,
  TEST_PACKAGE,
  type GoogleTestKeys,
} from '../support/googleFactory.js';
import { loadReceiptVectors } from '../support/receiptVectors.js';
import { captureToken, gmsToken, loadCaptures, type Capture } from '../support/verifyFileTokens.js';

const RUNS = Number(process.env.FUZZ_RUNS ?? 0) || undefined;
const SEED = Number(process.env.FUZZ_SEED ?? 20261124);
/** fast-check parameters: `runs` in CI, FUZZ_RUNS for a long run. */
const params = (runs: number) => ({ seed: SEED, numRuns: RUNS ?? runs, endOnFailure: true });
/** Per input; normal costs are well under 10 ms. Generous for a loaded 2-core machine. */
const BOUND_MS = 2_000;
const LONG_RUN_TIMEOUT = RUNS === undefined ? 60_000 : 3_600_000;

// ---- mutations ----

type Mutation =
  | { op: 'flip'; at: number; bit: number }
  | { op: 'truncate'; at: number }
  | { op: 'insert'; at: number; bytes: Uint8Array }
  | { op: 'overwrite'; at: number; bytes: Uint8Array }
  | { op: 'hugeLength'; at: number; major: number }
  | { op: 'nest'; depth: number }
  | {
      op: 'entries';
      kind: 'duplicate' | 'reorder' | 'retype' | 'drop';
      inner: boolean;
      index: number;
      value: unknown;
    };

const at = fc.nat({ max: 70_000 });
const cborValue: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.integer(),
    fc.string({ maxLength: 40 }),
    fc.uint8Array({ maxLength: 40 }).map((b) => Buffer.from(b)),
    fc.constantFrom(null, true, false, 1.5, -1, 2 ** 53 + 2),
    fc.array(tie('value'), { maxLength: 4 }),
    fc
      .array(fc.tuple(fc.string({ maxLength: 8 }), tie('value')), { maxLength: 4 })
      .map((e) => new Map(e)),
  ),
})).value;

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ op: fc.constant('flip' as const), at, bit: fc.integer({ min: 0, max: 7 }) }),
  fc.record({ op: fc.constant('truncate' as const), at }),
  fc.record({
    op: fc.constant('insert' as const),
    at,
    bytes: fc.uint8Array({ minLength: 1, maxLength: 16 }),
  }),
  fc.record({
    op: fc.constant('overwrite' as const),
    at,
    bytes: fc.uint8Array({ minLength: 1, maxLength: 16 }),
  }),
  fc.record({ op: fc.constant('hugeLength' as const), at, major: fc.integer({ min: 0, max: 7 }) }),
  fc.record({ op: fc.constant('nest' as const), depth: fc.integer({ min: 1, max: 200 }) }),
  fc.record({
    op: fc.constant('entries' as const),
    kind: fc.constantFrom(
      'duplicate' as const,
      'reorder' as const,
      'retype' as const,
      'drop' as const,
    ),
    inner: fc.boolean(),
    index: fc.nat({ max: 10 }),
    value: cborValue,
  }),
);

const cat = (...parts: Uint8Array[]) => new Uint8Array(Buffer.concat(parts));

/** A map written entry by entry (so keys may repeat), as cbor-x would write each key and value. */
const rawMap = (entries: [unknown, unknown][]) =>
  cat(
    Uint8Array.of(0xb8, entries.length),
    ...entries.flatMap(([k, v]) => [encodeCbor(k), encodeCbor(v)]),
  );

function mutateEntries(bytes: Uint8Array, m: Extract<Mutation, { op: 'entries' }>): Uint8Array {
  let root: unknown;
  try {
    root = decodeStrictCbor(bytes, { maxBytes: TOKEN_MAX_BYTES, maxDepth: TOKEN_MAX_DEPTH });
  } catch {
    return bytes;
  }
  if (!isMap(root)) return bytes;
  // the evidence map (apple / gms) or the top map
  const service = isMap(root.get('device'))
    ? (root.get('device') as Map<unknown, unknown>).get('service')
    : undefined;
  const inner =
    m.inner && isMap(root.get(service)) ? (root.get(service) as Map<unknown, unknown>) : undefined;
  const target = [...(inner ?? root)] as [unknown, unknown][];
  if (target.length === 0) return bytes;
  const i = m.index % target.length;
  const edited = [...target];
  if (m.kind === 'duplicate')
    edited.splice((i + 1) % (edited.length + 1), 0, [target[i]![0], m.value]);
  if (m.kind === 'reorder') edited.reverse();
  if (m.kind === 'retype') edited[i] = [target[i]![0], m.value];
  if (m.kind === 'drop') edited.splice(i, 1);
  return inner ? spliceRaw(root, service, rawMap(edited)) : rawMap(edited);
}

/** The top map with the value of `key` replaced by already-encoded bytes. */
function spliceRaw(root: Map<unknown, unknown>, key: unknown, value: Uint8Array): Uint8Array {
  const parts: Uint8Array[] = [Uint8Array.of(0xb8, root.size)];
  for (const [k, v] of root) parts.push(encodeCbor(k), k === key ? value : encodeCbor(v));
  return cat(...parts);
}

function mutate(bytes: Uint8Array, m: Mutation): Uint8Array {
  const pos = (n: number) => (bytes.length === 0 ? 0 : n % bytes.length);
  switch (m.op) {
    case 'flip': {
      const out = new Uint8Array(bytes);
      if (out.length > 0) out[pos(m.at)]! ^= 1 << m.bit;
      return out;
    }
    case 'truncate':
      return bytes.subarray(0, pos(m.at));
    case 'insert':
      return cat(bytes.subarray(0, pos(m.at)), m.bytes, bytes.subarray(pos(m.at)));
    case 'overwrite': {
      const out = new Uint8Array(bytes);
      out.set(m.bytes.subarray(0, Math.max(0, out.length - pos(m.at))), pos(m.at));
      return out;
    }
    case 'hugeLength':
      // a head claiming 2^64-1 bytes / items / value at a random offset
      return cat(
        bytes.subarray(0, pos(m.at)),
        Uint8Array.of((m.major << 5) | 27, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
        bytes.subarray(pos(m.at) + 1),
      );
    case 'nest':
      return cat(new Uint8Array(m.depth).fill(0x81), bytes);
    case 'entries':
      return mutateEntries(bytes, m);
  }
}

const mutations = fc.array(mutation, { minLength: 1, maxLength: 3 });
const applyAll = (bytes: Uint8Array, ms: Mutation[]) => ms.reduce(mutate, bytes);

// ---- properties ----

const hex = (b: unknown) =>
  isBytes(b)
    ? Buffer.from(b).toString('hex')
    : typeof b === 'string'
      ? b
      : JSON.stringify(b ?? null);

/**
 * What a verdict rests on, or null when the token does not even decode: an accepted mutation
 * must leave all of it unchanged (the receipt of an attestation is not verified, so not in it).
 */
function significant(token: Uint8Array): string | null {
  try {
    const root = decodeStrictCbor(token, {
      maxBytes: TOKEN_MAX_BYTES,
      maxDepth: TOKEN_MAX_DEPTH,
    }) as Map<unknown, unknown>;
    const device = root.get('device') as Map<unknown, unknown>;
    const service = device.get('service');
    const evidence = root.get(service) as Map<unknown, unknown>;
    const parts = [hex(root.get('v')), hex(root.get('nonce')), String(service)];
    for (const key of ['keyId', 'assertion', 'packageName', 'integrityToken'])
      parts.push(hex(evidence.get(key)));
    const attestation = evidence.get('attestation');
    if (isBytes(attestation)) {
      const object = decodeStrictCbor(attestation, {
        maxBytes: TOKEN_MAX_BYTES,
        maxDepth: TOKEN_MAX_DEPTH,
      }) as Map<unknown, unknown>;
      const stmt = object.get('attStmt') as Map<unknown, unknown>;
      parts.push(
        hex(object.get('fmt')),
        hex(object.get('authData')),
        ...((stmt.get('x5c') as unknown[]) ?? []).map(hex),
      );
    }
    return parts.join('|');
  } catch {
    return null;
  }
}

/** Runs `work`, which may only reject with one of `allowed`, within the bound. */
async function bounded(
  work: () => unknown,
  allowed: readonly (new (...args: never[]) => Error)[],
): Promise<unknown> {
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

// ---- seeds ----

const captures = loadCaptures();
const registration = captures.find((c) => c.id === 'veehaitch-ios-14.4')!;
const withAssertion = captures.find(
  (c) => c.id === 'veehaitch-ios-14.2' && c.assertions.length > 0,
)!;
const TOKEN_NONCE = Buffer.alloc(32, 0x5a); // captureToken's nonce
const b64 = (s: string) => Buffer.from(s, 'base64');

function appleVerifier(capture: Capture, registered: boolean): PlatformVerifier {
  const allowlist = createMemoryAllowlist({ apple: [{ appId: capture.appId, env: 'any' }] });
  const a = capture.assertions[0];
  const keys =
    registered && a
      ? [
          {
            keyId: b64(capture.keyId),
            publicKey: new Uint8Array(
              createPublicKey(a.publicKeyPem).export({ type: 'spki', format: 'der' }),
            ),
            appId: capture.appId,
            environment: 'Production' as const,
            counter: a.expectedCounter - 1,
          },
        ]
      : [];
  return createAppleVerifier({
    allowlist,
    keys: createMemoryAppleKeyStore(keys, { readOnly: true }),
    roots: defaultAppleRoots(),
  });
}

let google: GoogleTestKeys;
let gmsSeed: Uint8Array;
let gmsNonce: Uint8Array;
let jweSeed: string;
const GMS_NOW = new Date('2026-03-01T12:00:00.000Z');

beforeAll(async () => {
  google = await createGoogleTestKeys();
  gmsNonce = randomNonce();
  jweSeed = await mintIntegrityToken({ keys: google, nonce: gmsNonce, now: GMS_NOW });
  gmsSeed = gmsToken({ nonce: gmsNonce, packageName: TEST_PACKAGE, integrityToken: jweSeed });
});

interface Seed {
  name: string;
  token: () => Uint8Array;
  verify: (token: Uint8Array) => ReturnType<typeof verifyToken>;
}

const seeds: Seed[] = [
  {
    name: 'App Attest registration (real capture)',
    token: () => captureToken(registration),
    verify: (token) =>
      verifyToken(
        { token, expectedNonce: TOKEN_NONCE, clientDataHash: b64(registration.clientDataHash!) },
        {
          now: () => new Date(registration.verifyAt!),
          verifiers: { apple: appleVerifier(registration, false) },
        },
      ),
  },
  {
    name: 'App Attest assertion (real capture)',
    token: () => captureToken(withAssertion, { assertion: withAssertion.assertions[0]!.assertion }),
    verify: (token) =>
      verifyToken(
        {
          token,
          expectedNonce: TOKEN_NONCE,
          clientDataHash: b64(withAssertion.assertions[0]!.clientDataHash),
        },
        {
          now: () => new Date(withAssertion.verifyAt ?? Date.now()),
          verifiers: { apple: appleVerifier(withAssertion, true) },
        },
      ),
  },
  {
    name: 'Play Integrity (factory-made)',
    token: () => gmsSeed,
    verify: (token) =>
      verifyToken(
        { token, expectedNonce: gmsNonce },
        {
          now: () => GMS_NOW,
          verifiers: {
            gms: createGoogleVerifier({
              allowlist: createMemoryAllowlist({ android: [googlePolicy(google)] }),
            }),
          },
        },
      ),
  },
];

describe('fuzz: verifyToken end to end', () => {
  it.each(seeds.map((s) => [s.name, s] as const))('%s: the seed is valid', async (_name, seed) => {
    const outcome = await seed.verify(seed.token());
    expect(outcome.ok ? 'valid' : `${outcome.reason}: ${outcome.detail}`).toBe('valid');
  });

  it.each(seeds.map((s) => [s.name, s] as const))(
    '%s: mutations never fault, and are accepted only with every significant field intact',
    async (_name, seed) => {
      const original = seed.token();
      const fingerprint = significant(original);
      await fc.assert(
        fc.asyncProperty(mutations, async (ms) => {
          const token = applyAll(original, ms);
          const outcome = (await bounded(() => seed.verify(token), [])) as Awaited<
            ReturnType<typeof verifyToken>
          >;
          if (outcome.ok) expect(significant(token)).toBe(fingerprint);
        }),
        params(60),
      );
    },
    LONG_RUN_TIMEOUT,
  );

  it(
    'arbitrary bytes and arbitrary CBOR values are rejected, never a fault',
    async () => {
      const verify = seeds[2]!.verify;
      await fc.assert(
        fc.asyncProperty(
          fc.oneof(
            fc.uint8Array({ maxLength: 512 }),
            cborValue.map((v) => new Uint8Array(encodeCbor(v))),
          ),
          async (token) => {
            const outcome = (await bounded(() => verify(token), [])) as Awaited<
              ReturnType<typeof verifyToken>
            >;
            expect(outcome.ok).toBe(false);
          },
        ),
        params(200),
      );
    },
    LONG_RUN_TIMEOUT,
  );
});

describe('fuzz: parsers', () => {
  const apple = captures.filter((c) => c.attestation).slice(0, 4);
  const assertions = captures.flatMap((c) => c.assertions.map((a) => b64(a.assertion))).slice(0, 4);
  // the raw authData of each attestation, for the authenticator data parser
  const authDatas = apple.map(
    (c) =>
      (
        decodeStrictCbor(b64(c.attestation!), {
          maxBytes: TOKEN_MAX_BYTES,
          maxDepth: TOKEN_MAX_DEPTH,
        }) as Map<string, unknown>
      ).get('authData') as Uint8Array,
  );

  it(
    'the strict CBOR decoder only ever throws CborError',
    async () => {
      const originals = [captureToken(registration), ...apple.map((c) => b64(c.attestation!))];
      await fc.assert(
        fc.asyncProperty(fc.nat({ max: originals.length - 1 }), mutations, async (i, ms) => {
          await bounded(
            () =>
              decodeStrictCbor(applyAll(new Uint8Array(originals[i]!), ms), {
                maxBytes: TOKEN_MAX_BYTES,
                maxDepth: TOKEN_MAX_DEPTH,
              }),
            [CborError],
          );
        }),
        params(300),
      );
      fc.assert(
        fc.property(fc.uint8Array({ maxLength: 256 }), (bytes) => {
          try {
            decodeStrictCbor(bytes, { maxBytes: TOKEN_MAX_BYTES, maxDepth: TOKEN_MAX_DEPTH });
          } catch (err) {
            expect(err).toBeInstanceOf(CborError);
          }
        }),
        params(500),
      );
    },
    LONG_RUN_TIMEOUT,
  );

  it(
    'the App Attest attestation, assertion and authData parsers only ever reject',
    async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.nat({ max: apple.length - 1 }),
          fc.nat({ max: assertions.length - 1 }),
          mutations,
          async (i, j, ms) => {
            await bounded(
              () =>
                parseAttestationObject(applyAll(new Uint8Array(b64(apple[i]!.attestation!)), ms)),
              [Rejection],
            );
            await bounded(
              () => parseAssertionObject(applyAll(new Uint8Array(assertions[j]!), ms)),
              [Rejection],
            );
            const authData = authDatas[i];
            expect(isBytes(authData)).toBe(true);
            await bounded(
              () => parseAuthenticatorData(applyAll(authData!, ms), 'attestation'),
              [Rejection],
            );
            await bounded(
              () => parseAuthenticatorData(applyAll(authData!, ms), 'assertion'),
              [Rejection],
            );
          },
        ),
        params(150),
      );
    },
    LONG_RUN_TIMEOUT,
  );

  it(
    'the receipt verifier never throws, and accepts a mutated receipt only with the same facts',
    async () => {
      const receipts = createReceiptVerifier();
      const seeds = loadReceiptVectors()
        .filter((v) => v.name.startsWith('veehaitch-ios-14.2') || v.name === 'dreipol-pyattest')
        .flatMap((v) => [
          {
            bytes: v.receipt,
            appId: v.appId,
            leaf: v.leaf,
            type: 'ATTEST' as const,
            created: v.check.fields.creationTime.parsed,
          },
          ...v.refreshed.slice(0, 1).map((r) => ({
            bytes: r.bytes,
            appId: v.appId,
            leaf: v.leaf,
            type: 'RECEIPT' as const,
            created: r.check.creationTime!.parsed,
          })),
        ]);
      const summary = (f: ReceiptFacts | null) =>
        f &&
        [
          f.type,
          f.appId,
          hex(f.attestedCertificate),
          f.creationTime.toISOString(),
          f.expirationTime?.toISOString(),
          f.notBefore?.toISOString(),
          f.riskMetric,
          f.environment,
        ].join('|');
      const originals = await Promise.all(
        seeds.map((s) =>
          receipts.verify(
            s.bytes,
            { type: s.type, appId: s.appId, attestedCertificate: s.leaf },
            new Date(new Date(s.created).getTime() + 5000),
          ),
        ),
      );
      expect(originals.every((o) => o.valid)).toBe(true);
      await fc.assert(
        fc.asyncProperty(fc.nat({ max: seeds.length - 1 }), mutations, async (i, ms) => {
          const seed = seeds[i]!;
          const verdict = (await bounded(
            () =>
              receipts.verify(
                applyAll(new Uint8Array(seed.bytes), ms),
                { type: seed.type, appId: seed.appId, attestedCertificate: seed.leaf },
                new Date(new Date(seed.created).getTime() + 5000),
              ),
            [],
          )) as ReceiptVerdict;
          if (verdict.valid) expect(summary(verdict.facts)).toBe(summary(originals[i]!.facts));
        }),
        params(150),
      );
      await fc.assert(
        fc.asyncProperty(fc.uint8Array({ maxLength: 512 }), async (bytes) => {
          const verdict = (await bounded(
            () => receipts.verify(bytes, { type: 'ATTEST' }, new Date()),
            [],
          )) as ReceiptVerdict;
          expect(verdict.valid).toBe(false);
        }),
        params(200),
      );
    },
    LONG_RUN_TIMEOUT,
  );

  it(
    'opening a mutated JWE/JWS never throws, and never opens to another payload',
    async () => {
      const cache = new KeyCache();
      const pairs = [keyPairOf(google)];
      const segment = fc.constantFrom(0, 1, 2, 3, 4);
      const textMutation = fc.oneof(
        fc.record({
          op: fc.constant('char' as const),
          at: fc.nat(),
          char: fc.constantFrom('A', '_', '-', '.', '=', '+', '/', '\u0000', 'é'),
        }),
        fc.record({ op: fc.constant('drop' as const), segment }),
        fc.record({ op: fc.constant('duplicate' as const), segment }),
        fc.record({ op: fc.constant('swap' as const), segment, other: segment }),
        fc.record({ op: fc.constant('truncate' as const), at: fc.nat() }),
        fc.record({
          op: fc.constant('huge' as const),
          segment,
          size: fc.integer({ min: 1, max: 20_000 }),
        }),
      );
      const apply = (jwe: string, m: Record<string, unknown>): string => {
        const parts = jwe.split('.');
        switch (m.op) {
          case 'char': {
            const i = (m.at as number) % jwe.length;
            return jwe.slice(0, i) + String(m.char) + jwe.slice(i + 1);
          }
          case 'drop':
            return parts.filter((_, i) => i !== m.segment).join('.');
          case 'duplicate':
            return [
              ...parts.slice(0, (m.segment as number) + 1),
              parts[m.segment as number],
              ...parts.slice((m.segment as number) + 1),
            ].join('.');
          case 'swap': {
            const out = [...parts];
            [out[m.segment as number], out[m.other as number]] = [
              parts[m.other as number]!,
              parts[m.segment as number]!,
            ];
            return out.join('.');
          }
          case 'truncate':
            return jwe.slice(0, (m.at as number) % jwe.length);
          default: {
            const out = [...parts];
            out[m.segment as number] = 'A'.repeat(m.size as number);
            return out.join('.');
          }
        }
      };
      const seed = await openIntegrityToken(jweSeed, pairs, (p) => cache.get(p));
      if (seed.stage !== 'verified') throw new Error(`the seed does not open: ${seed.problem}`);
      const payload = Buffer.from(seed.payload).toString('hex');
      await fc.assert(
        fc.asyncProperty(fc.array(textMutation, { minLength: 1, maxLength: 3 }), async (ms) => {
          const jwe = ms.reduce((t, m) => apply(t, m as Record<string, unknown>), jweSeed);
          const opened = (await bounded(
            () => openIntegrityToken(jwe, pairs, (p) => cache.get(p)),
            [],
          )) as Awaited<ReturnType<typeof openIntegrityToken>>;
          // only an encoding-level no-op (the same bytes) may still open, and only to the same payload
          if (opened.stage === 'verified')
            expect(Buffer.from(opened.payload).toString('hex')).toBe(payload);
        }),
        params(150),
      );
    },
    LONG_RUN_TIMEOUT,
  );
});
