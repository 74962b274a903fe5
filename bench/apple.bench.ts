/**
 * App Attest verification cost on real captures (test/fixtures/apple), with stores that answer
 * at once, so the numbers are the verifier's own: `npx vitest bench --run --project shared bench/apple.bench.ts`.
 * Every scenario must be accepted (a rejection would time an early exit); vitest does not report
 * a bench that throws, so each scenario is run once when the file loads, where a rejection fails it.
 */
import { createPublicKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { bench, describe } from 'vitest';
import { createAppleVerifier } from '../src/core/apple/appleVerifier.js';
import { defaultAppleRoots } from '../src/core/apple/trustRoots.js';
import { parseAttestationObject } from '../src/core/apple/verifyAttestation.js';
import { createReceiptVerifier } from '../src/core/apple/verifyReceipt.js';
import { createMemoryAllowlist } from '../src/core/memoryStores.js';
import { TraceRecorder } from '../src/core/trace.js';
import type { AppleKeyRecord, AppleKeyStore } from '../src/core/ports.js';

interface Capture {
  appId: string;
  keyId: string;
  attestation: string;
  clientDataHash: string;
  verifyAt: string;
  assertions: {
    assertion: string;
    clientDataHash: string;
    expectedCounter: number;
    publicKeyPem: string;
  }[];
}

const load = (name: string) =>
  JSON.parse(
    readFileSync(new URL(`../test/fixtures/apple/${name}.json`, import.meta.url), 'utf8'),
  ) as Capture;
const b64 = (text: string) => Buffer.from(text, 'base64');

const capture = load('veehaitch-ios-14.2');
const allowlist = createMemoryAllowlist({ apple: [{ appId: capture.appId, env: 'any' }] });
const roots = defaultAppleRoots();
const keyId = b64(capture.keyId);

// ---- assertion ----
const sample = capture.assertions[0]!;
const record: AppleKeyRecord = {
  keyId,
  publicKey: new Uint8Array(
    createPublicKey(sample.publicKeyPem).export({ type: 'spki', format: 'der' }),
  ),
  appId: capture.appId,
  environment: 'Development',
  counter: 0,
};
// the stored counter stays 0 so the same assertion verifies on every iteration
const registeredKey: AppleKeyStore = {
  find: async () => record,
  register: async () => false,
  raiseCounter: async () => true,
};
const assertionEvidence = new Map<string, unknown>([
  ['keyId', keyId],
  ['assertion', b64(sample.assertion)],
]);
const assertionCtx = () => ({
  nonce: Buffer.alloc(32),
  now: new Date(),
  clientDataHash: b64(sample.clientDataHash),
  trace: new TraceRecorder(),
});
const warmAssertions = createAppleVerifier({ roots, allowlist, keys: registeredKey });

// ---- registration ----
const unknownKey: AppleKeyStore = {
  find: async () => null,
  register: async () => true,
  raiseCounter: async () => false,
};
const attestationEvidence = new Map<string, unknown>([
  ['keyId', keyId],
  ['attestation', b64(capture.attestation)],
]);
// a few seconds after the receipt's creation (2020-11-21T22:13:02.796Z), so the attestation's
// receipt is valid too and the registration pays its whole check (CMS, chain to G3, attributes)
const REGISTRATION_AT = new Date('2020-11-21T22:13:08Z');
const registrationCtx = () => ({
  nonce: Buffer.alloc(32),
  now: REGISTRATION_AT,
  clientDataHash: b64(capture.clientDataHash),
  trace: new TraceRecorder(),
});
const warmRegistrations = createAppleVerifier({ roots, allowlist, keys: unknownKey });
// the baseline: the same registration with the receipt kept unchecked
const warmWithoutReceipts = createAppleVerifier({
  roots,
  allowlist,
  keys: unknownKey,
  receipts: null,
});
const receiptVerifier = createReceiptVerifier();
const receiptBytes = parseAttestationObject(b64(capture.attestation)).receipt!;
const leafDer = parseAttestationObject(b64(capture.attestation)).x5c[0]!;

await warmAssertions.verify(assertionEvidence, assertionCtx());
const checked = new TraceRecorder();
await warmRegistrations.verify(attestationEvidence, { ...registrationCtx(), trace: checked });
if (checked.facts.receipt !== 'valid')
  throw new Error(`the bench's receipt must be valid: ${checked.facts.receiptProblem}`);
await warmWithoutReceipts.verify(attestationEvidence, registrationCtx());

describe('App Attest assertion', () => {
  bench(
    'assertion, warm key cache (one P-256 verify)',
    async () => {
      await warmAssertions.verify(assertionEvidence, assertionCtx());
    },
    { time: 2000 }, // the warm-up iterations fill the key cache
  );

  bench(
    'assertion, cold key cache (KeyObject from DER first)',
    async () => {
      await createAppleVerifier({ roots, allowlist, keys: registeredKey }).verify(
        assertionEvidence,
        assertionCtx(),
      );
    },
    { time: 2000 },
  );
});

describe('App Attest registration', () => {
  bench(
    'registration, cold intermediate cache',
    async () => {
      await createAppleVerifier({ roots, allowlist, keys: unknownKey }).verify(
        attestationEvidence,
        registrationCtx(),
      );
    },
    { time: 2000 },
  );

  bench(
    'registration, warm intermediate cache',
    async () => {
      await warmRegistrations.verify(attestationEvidence, registrationCtx());
    },
    { time: 2000 }, // the warm-up iterations fill the intermediate cache
  );

  bench(
    'registration, warm intermediate cache, receipt not validated (baseline)',
    async () => {
      await warmWithoutReceipts.verify(attestationEvidence, registrationCtx());
    },
    { time: 2000 },
  );

  bench(
    'the receipt check alone (CMS signature, fixed chain to Apple Root CA - G3, attributes)',
    async () => {
      const verdict = await receiptVerifier.verify(
        receiptBytes,
        { type: 'ATTEST', appId: capture.appId, attestedCertificate: leafDer },
        REGISTRATION_AT,
      );
      if (!verdict.valid) throw new Error(verdict.problem);
    },
    { time: 2000 },
  );
});
