/**
 * Fuzz: hostile App Attest receipts (the mutual-issuer cycle, the same cycle under Apple Root CA -
 * G3's name, the fan-out of candidate issuers, 9,990 empty SETs, deep nesting), mutated byte by
 * byte: the verifier never throws, never accepts, and no input costs more than the fixed path's
 * three signature checks (counted, not timed).
 * Seeded and small by default; a longer run: FUZZ_RUNS=20000 npx vitest run test/fuzz
 */
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { createReceiptVerifier, defaultReceiptRoots } from '../../src/core/apple/verifyReceipt.js';
import {
  cycleReceipt,
  deepReceipt,
  emptySetsReceipt,
  fanOutReceipt,
  HOSTILE_APP_ID,
  HOSTILE_NOW,
  nameOf,
} from '../support/hostileReceipts.js';
import { loadReceiptVectors } from '../support/receiptVectors.js';

const RUNS = Number(process.env.FUZZ_RUNS ?? 0) || undefined;
const SEED = Number(process.env.FUZZ_SEED ?? 20261127);
const params = (runs: number) => ({ seed: SEED, numRuns: RUNS ?? runs, endOnFailure: true });
const TIMEOUT = RUNS === undefined ? 60_000 : 3_600_000;

const mutation = fc.oneof(
  fc.record({ op: fc.constant('flip' as const), at: fc.nat(), bit: fc.nat({ max: 7 }) }),
  fc.record({ op: fc.constant('truncate' as const), at: fc.nat() }),
  fc.record({
    op: fc.constant('overwrite' as const),
    at: fc.nat(),
    bytes: fc.uint8Array({ minLength: 1, maxLength: 4 }),
  }),
  // a length octet forced long or indefinite, where BER readers go wrong
  fc.record({
    op: fc.constant('overwrite' as const),
    at: fc.nat(),
    bytes: fc.constantFrom(
      new Uint8Array([0x80]),
      new Uint8Array([0x84, 0xff, 0xff, 0xff, 0xff]),
      new Uint8Array([0x30, 0x80]),
      new Uint8Array([0x31, 0x00]),
    ),
  }),
);
type Mutation = typeof mutation extends fc.Arbitrary<infer M> ? M : never;

function mutate(bytes: Uint8Array, m: Mutation): Uint8Array {
  const out = new Uint8Array(bytes);
  if (out.length === 0) return out;
  const at = m.at % out.length;
  if (m.op === 'flip') out[at]! ^= 1 << m.bit;
  else if (m.op === 'truncate') return out.subarray(0, at);
  else out.set(m.bytes.subarray(0, out.length - at), at);
  return out;
}

describe('fuzz: hostile receipts', () => {
  const attested = loadReceiptVectors()[0]!.leaf;
  const seeds: Buffer[] = [];
  beforeAll(async () => {
    seeds.push(
      await cycleReceipt(attested),
      await cycleReceipt(attested, nameOf(defaultReceiptRoots()[0]!)),
      await fanOutReceipt(attested, 3),
      await fanOutReceipt(attested, 12),
      await emptySetsReceipt(attested, 9990),
      await deepReceipt(attested, 5000),
    );
  });

  it(
    'a mutated cycle, fan-out, empty-SETs or deep receipt: never throws, never valid, at most three signature checks',
    async () => {
      let signatures = 0;
      const verifier = createReceiptVerifier(undefined, { onSignatureCheck: () => signatures++ });
      await fc.assert(
        fc.asyncProperty(
          fc.nat({ max: seeds.length - 1 }),
          fc.array(mutation, { maxLength: 3 }),
          async (i, ms) => {
            const bytes = ms.reduce(mutate, new Uint8Array(seeds[i]!));
            const before = signatures;
            const verdict = await verifier.verify(
              bytes,
              { type: 'ATTEST', appId: HOSTILE_APP_ID, attestedCertificate: attested },
              HOSTILE_NOW,
            );
            expect(verdict.valid).toBe(false);
            expect(signatures - before).toBeLessThanOrEqual(3);
          },
        ),
        params(300),
      );
    },
    TIMEOUT,
  );
});
