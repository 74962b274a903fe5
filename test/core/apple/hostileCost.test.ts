/**
 * What a hostile receipt or x5c chain costs, counted in signature checks (not timed): the mutual
 * issuer cycle that made pkijs's path builder recurse for good, the fan-out, the 9,990 empty SETs,
 * oversize and deep nesting each cost at most the fixed path's checks, and a replay costs none.
 * A real receipt costs three checks cold and one warm. In the attestation-plus-assertion shape the
 * receipt is looked at only once the assertion verified, and never for a registered key.
 */
import { X509Certificate } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { createAppleVerifier } from '../../../src/core/apple/appleVerifier.js';
import { createCertificateChainVerifier } from '../../../src/core/apple/certificateChain.js';
import {
  createReceiptVerifier,
  defaultReceiptRoots,
  type ReceiptVerifier,
} from '../../../src/core/apple/verifyReceipt.js';
import {
  createMemoryAllowlist,
  createMemoryAppleKeyStore,
} from '../../../src/core/memoryStores.js';
import { verifyToken } from '../../../src/core/verify.js';
import {
  createAssertion,
  createAttestation,
  createDeviceKey,
  createTestCa,
  createTestIntermediate,
  createTestRoot,
  encodeAppleToken,
  TEST_APP_ID,
  TEST_NONCE,
  TEST_NOW,
  type TestCa,
} from '../../support/appleFactory.js';
import {
  cycleReceipt,
  deepReceipt,
  emptySetsReceipt,
  fanOutReceipt,
  HOSTILE_APP_ID,
  HOSTILE_NOW,
  nameOf,
} from '../../support/hostileReceipts.js';
import { after, loadReceiptVectors } from '../../support/receiptVectors.js';

const real = loadReceiptVectors().find((v) => v.name === 'veehaitch-ios-14.2')!;
const attested = real.leaf;
const expectation = {
  type: 'ATTEST' as const,
  appId: HOSTILE_APP_ID,
  attestedCertificate: attested,
};

function counted(roots?: readonly X509Certificate[]) {
  const counter = { signatures: 0 };
  const verifier = createReceiptVerifier(roots, { onSignatureCheck: () => counter.signatures++ });
  return { counter, verifier };
}

/** Signature checks of one verify of `bytes` by `verifier`, and its verdict. */
async function cost(
  { counter, verifier }: ReturnType<typeof counted>,
  bytes: Uint8Array,
  expect_ = expectation,
  now = HOSTILE_NOW,
) {
  const before = counter.signatures;
  const verdict = await verifier.verify(bytes, expect_, now);
  return { signatures: counter.signatures - before, verdict };
}

describe('a receipt costs at most the fixed path', () => {
  it('a real receipt: three signature checks cold (intermediate, signer, CMS), one warm', async () => {
    const c = counted();
    const now = after(real.check.fields.creationTime.parsed, 5);
    const expect_ = { type: 'ATTEST' as const, appId: real.appId, attestedCertificate: real.leaf };
    expect(await cost(c, real.receipt, expect_, now)).toMatchObject({
      signatures: 3,
      verdict: { valid: true },
    });
    expect(await cost(c, real.receipt, expect_, now)).toMatchObject({
      signatures: 1,
      verdict: { valid: true },
    });
  });

  it('two CAs that issue each other: refused before any signature, at once', async () => {
    const c = counted();
    const receipt = await cycleReceipt(attested);
    const { signatures, verdict } = await cost(c, receipt);
    expect(verdict).toMatchObject({
      valid: false,
      problem: expect.stringMatching(/not issued by a configured root/),
    });
    expect(signatures).toBe(0);
  });

  it("the cycle under Apple Root CA - G3's name: one signature check, then none on replay", async () => {
    const c = counted();
    const receipt = await cycleReceipt(attested, nameOf(defaultReceiptRoots()[0]!));
    const first = await cost(c, receipt);
    expect(first.verdict).toMatchObject({
      valid: false,
      problem: expect.stringMatching(/intermediate is not signed by the root/),
    });
    expect(first.signatures).toBe(1);
    expect(await cost(c, receipt)).toMatchObject({ signatures: 0, verdict: { valid: false } });
  });

  it('many candidate issuers: refused by count, or as ambiguous, before any signature', async () => {
    const c = counted();
    const many = await cost(c, await fanOutReceipt(attested, 20));
    expect(many).toMatchObject({
      signatures: 0,
      verdict: { valid: false, problem: expect.stringMatching(/21 certificates, more than 4/) },
    });
    const three = await cost(c, await fanOutReceipt(attested, 3));
    expect(three).toMatchObject({
      signatures: 0,
      verdict: {
        valid: false,
        problem: expect.stringMatching(/3 certificates are named as the signer's issuer/),
      },
    });
  });

  it("9,990 empty SETs where the certificates go (20 KB): refused at the outline's element bound", async () => {
    const receipt = await emptySetsReceipt(attested, 9990);
    expect(receipt.length).toBeGreaterThan(20_000);
    expect(await cost(counted(), receipt)).toMatchObject({
      signatures: 0,
      verdict: { valid: false, problem: expect.stringMatching(/not BER: more than \d+ elements/) },
    });
  });

  it('nesting 5,000 deep, and a receipt past 32 KiB: refused before anything is read', async () => {
    const deep = await deepReceipt(attested, 5000);
    expect(await cost(counted(), deep)).toMatchObject({
      signatures: 0,
      verdict: { valid: false, problem: expect.stringMatching(/not BER: nested deeper than/) },
    });
    const big = Buffer.concat([real.receipt, Buffer.alloc(40_000)]);
    expect(await cost(counted(), big)).toMatchObject({
      signatures: 0,
      verdict: { valid: false, problem: expect.stringMatching(/more than 32768/) },
    });
  });
});

describe('an x5c chain costs at most its two signatures, and a failed one none on replay', () => {
  let ca: TestCa;
  beforeAll(async () => {
    ca = await createTestCa();
  });

  it('an intermediate of another root under the same name: no signature (key identifiers differ)', async () => {
    const counter = { signatures: 0 };
    const chain = createCertificateChainVerifier(ca.roots, {
      onSignatureCheck: () => counter.signatures++,
    });
    const foreign = await createTestIntermediate(await createTestRoot());
    const device = await createDeviceKey();
    const { leafDer } = await createAttestation(ca, device);
    const x5c = [leafDer, ca.intermediate.der];
    expect(() => chain.verify([x5c[0]!, foreign.der], TEST_NOW)).toThrow(/configured trust root/);
    expect(counter.signatures).toBe(0);
    // the real chain: two checks, then one (the intermediate is remembered)
    chain.verify(x5c, TEST_NOW);
    expect(counter.signatures).toBe(2);
    chain.verify(x5c, TEST_NOW);
    expect(counter.signatures).toBe(3);
  });

  it('a leaf whose signature fails is remembered: its replay costs no signature', async () => {
    const counter = { signatures: 0 };
    const chain = createCertificateChainVerifier(ca.roots, {
      onSignatureCheck: () => counter.signatures++,
    });
    const device = await createDeviceKey();
    const { leafDer } = await createAttestation(ca, device);
    const x5c = [leafDer, ca.intermediate.der];
    const leaf = Buffer.from(x5c[0]!);
    leaf[leaf.length - 3]! ^= 0x01; // inside the leaf's signature
    expect(() => chain.verify([leaf, x5c[1]!], TEST_NOW)).toThrow(/not signed by the intermediate/);
    const once = counter.signatures;
    expect(() => chain.verify([leaf, x5c[1]!], TEST_NOW)).toThrow(/not signed by the intermediate/);
    expect(counter.signatures).toBe(once);
  });
});

describe('the attestation-plus-assertion shape looks at the receipt last', () => {
  let ca: TestCa;
  beforeAll(async () => {
    ca = await createTestCa();
  });

  function service(keys = createMemoryAppleKeyStore()) {
    const inner = createReceiptVerifier();
    const seen = { receipts: 0 };
    const receipts: ReceiptVerifier = {
      roots: inner.roots,
      verify: (...args) => {
        seen.receipts++;
        return inner.verify(...args);
      },
    };
    const verifier = createAppleVerifier({
      roots: ca.roots,
      allowlist: createMemoryAllowlist({ apple: [{ appId: TEST_APP_ID, env: 'any' }] }),
      keys,
      receipts,
    });
    const verify = (token: Uint8Array) =>
      verifyToken(
        { token, expectedNonce: TEST_NONCE },
        { now: () => TEST_NOW, verifiers: { apple: verifier } },
      );
    return { seen, verify, keys };
  }

  it('a replayed attestation with a hostile receipt and a wrong assertion: the receipt is never read', async () => {
    const device = await createDeviceKey();
    const other = await createDeviceKey();
    const receipt = await cycleReceipt(attested);
    const { attestation } = await createAttestation(ca, device, { receipt });
    const s = service();
    const wrong = createAssertion(device, { signWith: other.privateKey }).assertion;
    const refused = await s.verify(
      encodeAppleToken({ keyId: device.keyId, attestation, assertion: wrong }),
    );
    expect(refused).toMatchObject({ ok: false, reason: 'apple_signature_invalid' });
    expect(s.seen.receipts).toBe(0);

    // the right assertion: the receipt is checked (and reported invalid), then the key registers
    const right = createAssertion(device).assertion;
    const accepted = await s.verify(
      encodeAppleToken({ keyId: device.keyId, attestation, assertion: right }),
    );
    expect(accepted).toMatchObject({ ok: true, facts: { receipt: 'invalid' } });
    expect(s.seen.receipts).toBe(1);

    // registered: the attestation sent along is not examined again, receipt included
    const again = createAssertion(device, { counter: 2 }).assertion;
    expect(
      await s.verify(encodeAppleToken({ keyId: device.keyId, attestation, assertion: again })),
    ).toMatchObject({ ok: true });
    expect(s.seen.receipts).toBe(1);
  });
});
