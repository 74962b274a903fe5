// Receipts and iOS 27 extensions minted with the development CA, through the real verifiers as
// the server builds them per API key mode (createModeVerifiers): test keys accept them and their
// policies act on them; live keys find the receipt invalid.
import { X509Certificate } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { checkTokenReceipt } from '../../../src/core/apple/tokenReceipt.js';
import { defaultAppleRoots } from '../../../src/core/apple/trustRoots.js';
import {
  createReceiptVerifier,
  readReceiptFacts,
  withDevelopmentReceiptRoot,
} from '../../../src/core/apple/verifyReceipt.js';
import {
  createDevCa,
  createSimulatedKey,
  mintAssertion,
  mintAttestation,
  type DevCa,
  type SimulatedKey,
} from '../../../src/core/dev/devCa.js';
import { mintReceipt } from '../../../src/core/dev/devReceipt.js';
import { encodeAppleToken } from '../../../src/core/apple/appleToken.js';
import {
  createMemoryAllowlist,
  createMemoryAppleKeyStore,
} from '../../../src/core/memoryStores.js';
import type { AppleAppPolicy, KeyMode } from '../../../src/core/ports.js';
import { verifyToken } from '../../../src/core/verify.js';
import { createModeVerifiers } from '../../../src/server/modeVerifiers.js';
import { sha256 } from '../../support/appleFactory.js';

const APP_ID = 'ABCDE12345.com.example.receipts';
let ca: DevCa;
beforeAll(async () => {
  ca = await createDevCa(new Date());
});

function setup(policy: Omit<AppleAppPolicy, 'appId' | 'env'>) {
  const app: AppleAppPolicy = { appId: APP_ID, env: 'any', ...policy };
  const keys = createMemoryAppleKeyStore();
  const receipts = createReceiptVerifier();
  const verifiersFor = createModeVerifiers({
    allowlist: createMemoryAllowlist({ apple: [app] }),
    appleKeys: keys,
    appleRoots: defaultAppleRoots(),
    devRoot: async () => ca.rootCert,
    ttlMs: 60_000,
    receipts,
  });
  const verify = async (token: Uint8Array, nonce: Uint8Array, mode: KeyMode) =>
    verifyToken(
      { token, expectedNonce: nonce },
      { now: () => new Date(), verifiers: await verifiersFor(mode) },
    );
  return { app, keys, receipts, verify };
}

async function registration(
  key: SimulatedKey,
  options: { receipt?: boolean; validationCategory?: string; bundleVersion?: string } = {},
) {
  const nonce = new Uint8Array(32).fill(7);
  const { receipt, ...distribution } = options;
  const attestation = await mintAttestation(ca, key, {
    appId: APP_ID,
    environment: 'Production',
    clientDataHash: sha256(nonce),
    now: new Date(),
    ...(receipt ? { receipt } : {}),
    distribution,
  });
  return { nonce, token: encodeAppleToken({ nonce, keyId: key.keyId, attestation }) };
}

function assertion(key: SimulatedKey, counter: number) {
  const nonce = new Uint8Array(32).fill(counter);
  const assertionObject = mintAssertion(key, {
    appId: APP_ID,
    counter,
    clientDataHash: sha256(nonce),
  });
  return {
    nonce,
    token: encodeAppleToken({ nonce, keyId: key.keyId, assertion: assertionObject }),
  };
}

describe('dev mint apple --receipt --validation-category --bundle-version', () => {
  it('a test key accepts the receipt and reads the extensions; --require-receipt and --validation-category appstore pass', async () => {
    const { keys, verify } = setup({ requireReceipt: true, validationCategories: ['appstore'] });
    const key = createSimulatedKey();
    const { token, nonce } = await registration(key, {
      receipt: true,
      validationCategory: 'appstore',
      bundleVersion: '4.2',
    });
    const result = await verify(token, nonce, 'test');
    expect(result).toMatchObject({
      ok: true,
      details: {
        appleTokenDetails: { validationCategory: 'appstore', bundleVersion: '4.2' },
      },
    });
    const stored = keys.records.get(`test:${Buffer.from(key.keyId).toString('hex')}`)!;
    expect(stored.receipt?.problem).toBeNull();
    expect(stored.receipt?.type).toBe('ATTEST');
    // an assertion of the key carries the stored distribution
    const a = assertion(key, 1);
    expect(await verify(a.token, a.nonce, 'test')).toMatchObject({
      ok: true,
      details: { appleTokenDetails: { validationCategory: 'appstore', assertionCounter: 1 } },
    });
  });

  it('--validation-category rejects another category, and --require-receipt a registration without one', async () => {
    const { verify } = setup({ requireReceipt: true, validationCategories: ['appstore'] });
    const testflight = await registration(createSimulatedKey(), {
      receipt: true,
      validationCategory: 'testflight',
      bundleVersion: '4.2',
    });
    expect(await verify(testflight.token, testflight.nonce, 'test')).toMatchObject({
      ok: false,
      reason: 'apple_distribution_not_allowed',
    });
    const bare = await registration(createSimulatedKey(), { validationCategory: 'appstore' });
    expect(await verify(bare.token, bare.nonce, 'test')).toMatchObject({
      ok: false,
      reason: 'apple_receipt_invalid',
    });
  });

  it('a live key finds the development receipt invalid (and refuses the token)', async () => {
    const { receipts, verify } = setup({ requireReceipt: true });
    const { token, nonce } = await registration(createSimulatedKey(), { receipt: true });
    expect(await verify(token, nonce, 'live')).toMatchObject({ ok: false });
    // the receipt itself, as the live verifier checks it: not under a configured root
    const live = await checkTokenReceipt(token, receipts, new Date(), APP_ID);
    expect(live).toMatchObject({ valid: false, type: 'ATTEST' });
    expect(live!.problem).toContain('is not issued by a configured root');
    const test = await checkTokenReceipt(
      token,
      withDevelopmentReceiptRoot(receipts, ca.rootCert)!,
      new Date(),
      APP_ID,
    );
    expect(test).toMatchObject({ valid: true, type: 'ATTEST', appId: APP_ID });
    // the test verifier is a new one: the live one still has Apple's root alone
    expect(receipts.roots).toHaveLength(1);
  });

  it('a refreshed receipt carries the risk metric, and the next assertion sees it (one-statement path)', async () => {
    const { app, keys, verify } = setup({ requireReceipt: true, maxRiskMetric: 5 });
    const key = createSimulatedKey();
    const reg = await registration(key, { receipt: true });
    expect(await verify(reg.token, reg.nonce, 'test')).toMatchObject({ ok: true });
    const a1 = assertion(key, 1);
    expect(await verify(a1.token, a1.nonce, 'test')).toMatchObject({ ok: true });

    const record = keys.records.get(`test:${Buffer.from(key.keyId).toString('hex')}`)!;
    const previous = readReceiptFacts(record.receipt!.bytes)!;
    const refreshed = await mintReceipt(ca, {
      type: 'RECEIPT',
      appId: APP_ID,
      attestedCertificate: previous.attestedCertificate,
      environment: 'Production',
      now: new Date(),
      riskMetric: 9,
    });
    const verdict = await withDevelopmentReceiptRoot(undefined, ca.rootCert)!.verify(
      refreshed,
      { type: 'RECEIPT', appId: APP_ID, attestedCertificate: previous.attestedCertificate },
      new Date(),
    );
    expect(verdict).toMatchObject({ valid: true, facts: { type: 'RECEIPT', riskMetric: 9 } });
    // what the store's refresh writes; the verifier holds the row from the last assertion
    record.riskMetric = 9;

    const a2 = assertion(key, 2);
    expect(await verify(a2.token, a2.nonce, 'test')).toMatchObject({
      ok: false,
      reason: 'apple_risk_exceeded',
    });
    app.maxRiskMetric = 10;
    const a3 = assertion(key, 3);
    expect(await verify(a3.token, a3.nonce, 'test')).toMatchObject({
      ok: true,
      details: { appleTokenDetails: { riskMetric: 9 } },
    });
  });

  it('the receipt names the attested leaf and the development root anchors it', async () => {
    const key = createSimulatedKey();
    const { token } = await registration(key, { receipt: true });
    const summary = await checkTokenReceipt(
      token,
      createReceiptVerifier([new X509Certificate(ca.rootCert)]),
      new Date(),
      APP_ID,
    );
    expect(summary).toMatchObject({ valid: true, environment: 'production', riskMetric: null });
  });
});
