/**
 * Real App Attest captures (test/fixtures/apple): every attestation verifies at its own instant
 * and is refused today; every confirmed assertion verifies once and is refused when replayed.
 */
import { createPublicKey } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createAppleVerifier } from '../../../src/core/apple/appleVerifier.js';
import { parseAssertionObject } from '../../../src/core/apple/verifyAssertion.js';
import { defaultAppleRoots } from '../../../src/core/apple/trustRoots.js';
import {
  createMemoryAllowlist,
  createMemoryAppleKeyStore,
} from '../../../src/core/memoryStores.js';
import { Rejection } from '../../../src/core/reasons.js';
import { TraceRecorder } from '../../../src/core/trace.js';
import type { AppleEnvPolicy, AppleKeyRecord } from '../../../src/core/ports.js';
import type { PlatformDetails } from '../../../src/core/kinds.js';
import { b64, loadVectors, type Vector, type VectorAssertion } from './helpers.js';

const TODAY = new Date('2026-11-22T00:00:00Z');
const vectors = loadVectors();
const attestations = vectors.filter((v) => v.attestation);
const assertions = vectors.flatMap((v) =>
  v.assertions.map((a, i) => ({ name: `${v.id}#${i}`, vector: v, assertion: a })),
);
const MUST_REJECT = new Set(['thedhejavu-appattest-rs#0']);

const spkiOf = (pem: string) =>
  new Uint8Array(createPublicKey(pem).export({ type: 'spki', format: 'der' }));

async function outcome(work: Promise<PlatformDetails>): Promise<PlatformDetails | string> {
  try {
    return await work;
  } catch (err) {
    if (err instanceof Rejection) return err.reason;
    throw err;
  }
}

function registerAt(vector: Vector, now: Date, env: AppleEnvPolicy = vector.environment!) {
  const keys = createMemoryAppleKeyStore();
  const verifier = createAppleVerifier({
    roots: defaultAppleRoots(),
    allowlist: createMemoryAllowlist({ apple: [{ appId: vector.appId, env }] }),
    keys,
  });
  const evidence = new Map<string, unknown>([
    ['keyId', b64(vector.keyId)],
    ['attestation', b64(vector.attestation!)],
  ]);
  // these captures hash their challenge in their own way: clientDataHash is given, as verify-file does
  const ctx = {
    nonce: Buffer.alloc(32),
    now,
    clientDataHash: b64(vector.clientDataHash!),
    trace: new TraceRecorder(),
  };
  return { keys, result: outcome(verifier.verify(evidence, ctx)) };
}

function assertWith(vector: Vector, assertion: VectorAssertion, storedCounter: number) {
  const record: AppleKeyRecord = {
    keyId: b64(vector.keyId),
    publicKey: spkiOf(assertion.publicKeyPem),
    appId: vector.appId,
    environment: vector.environment === 'development' ? 'Development' : 'Production',
    counter: storedCounter,
  };
  const keys = createMemoryAppleKeyStore([record]);
  const verifier = createAppleVerifier({
    roots: defaultAppleRoots(),
    allowlist: createMemoryAllowlist({ apple: [{ appId: vector.appId, env: 'any' }] }),
    keys,
  });
  const evidence = new Map<string, unknown>([
    ['keyId', b64(vector.keyId)],
    ['assertion', b64(assertion.assertion)],
  ]);
  const verify = () =>
    outcome(
      verifier.verify(evidence, {
        nonce: Buffer.alloc(32),
        now: TODAY,
        clientDataHash: b64(assertion.clientDataHash),
        trace: new TraceRecorder(),
      }),
    );
  return { keys, verify };
}

describe('real attestations', () => {
  it('are all here (18)', () => {
    expect(attestations).toHaveLength(18);
  });

  describe.each(attestations.map((v) => [v.id, v] as const))('%s', (_id, vector) => {
    it('verifies at its verifyAt and registers the leaf key', async () => {
      const { keys, result } = registerAt(vector, new Date(vector.verifyAt!));
      expect(await result).toEqual({
        service: 'apple',
        appleTokenDetails: {
          keyIdentifier: vector.keyId,
          appId: vector.appId,
          environment: vector.environment === 'development' ? 'Development' : 'Production',
          assertionCounter: 0,
          // only Apple's 2026 sample carries the iOS 27 extensions: category 1, bundle version "1"
          ...(vector.authDataExtensions
            ? { validationCategory: 'platform', bundleVersion: '1' }
            : {}),
          // Apple's 2026 sample carries a key access-control blob (1.2.840.113635.100.8.6) and
          // the OS name iphoneos (1.2.840.113635.100.8.7): an iOS 27 key, as the OS name says
          platform: 'iOS',
        },
      });
      const stored = await keys.find(b64(vector.keyId));
      expect(Buffer.from(stored!.publicKey).equals(spkiOf(vector.leafPublicKeyPem!))).toBe(true);
    });

    it('is refused today: its leaf has expired (apple_chain_invalid)', async () => {
      expect(await registerAt(vector, TODAY).result).toBe('apple_chain_invalid');
    });

    it('is refused for an app allowlisted only for the other environment', async () => {
      const other = vector.environment === 'development' ? 'production' : 'development';
      expect(await registerAt(vector, new Date(vector.verifyAt!), other).result).toBe(
        'apple_environment_not_allowed',
      );
    });
  });
});

describe('real assertions', () => {
  it('are all here (14, one of them must be refused)', () => {
    expect(assertions).toHaveLength(14);
  });

  describe.each(
    assertions.filter((a) => !MUST_REJECT.has(a.name)).map((a) => [a.name, a] as const),
  )('%s', (_name, { vector, assertion }) => {
    it('carries flags 0x40 and no credential data', () => {
      const { authenticatorData } = parseAssertionObject(b64(assertion.assertion));
      expect(authenticatorData.bytes).toHaveLength(37);
      expect(authenticatorData.flags).toBe(0x40);
      expect(authenticatorData.counter).toBe(assertion.expectedCounter);
    });

    it('verifies once above the stored counter, raises it, and is refused when replayed', async () => {
      const { keys, verify } = assertWith(vector, assertion, assertion.expectedCounter - 1);
      expect(await verify()).toMatchObject({
        appleTokenDetails: { assertionCounter: assertion.expectedCounter, appId: vector.appId },
      });
      expect((await keys.find(b64(vector.keyId)))?.counter).toBe(assertion.expectedCounter);
      expect(await verify()).toBe('apple_counter_replay');
    });
  });

  it('refuses the thedhejavu assertion, whose signature does not verify (apple_signature_invalid)', async () => {
    const { vector, assertion } = assertions.find((a) => a.name === 'thedhejavu-appattest-rs#0')!;
    const { keys, verify } = assertWith(vector, assertion, assertion.expectedCounter - 1);
    expect(await verify()).toBe('apple_signature_invalid');
    expect((await keys.find(b64(vector.keyId)))?.counter).toBe(assertion.expectedCounter - 1);
  });
});
