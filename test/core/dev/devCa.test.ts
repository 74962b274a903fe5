// The development CA and the simulated device, checked by the real App Attest verifier: what the
// CA mints verifies only with its root, and key modes keep test registrations from live keys.
import { X509Certificate } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  createDevCa,
  createSimulatedKey,
  loadSimulatedKey,
  mintAssertion,
  mintAttestation,
  type DevCa,
} from '../../../src/core/dev/devCa.js';
import { encodeAppleToken } from '../../../src/core/apple/appleToken.js';
import { defaultAppleRoots } from '../../../src/core/apple/trustRoots.js';
import {
  createMemoryAllowlist,
  createMemoryAppleKeyStore,
} from '../../../src/core/memoryStores.js';
import type { KeyMode } from '../../../src/core/ports.js';
import { buildVerifiers } from '../../../src/core/verifiers.js';
import { verifyToken } from '../../../src/core/verify.js';
import { sha256 } from '../../support/appleFactory.js';

const APP_ID = 'ABCDE12345.com.example.dev';
const NOW = new Date('2026-11-22T12:00:00Z');
let ca: DevCa;
beforeAll(async () => {
  ca = await createDevCa(NOW);
});

describe('development CA', () => {
  const allowlist = createMemoryAllowlist({ apple: [{ appId: APP_ID, env: 'any' }] });
  const keys = createMemoryAppleKeyStore();
  const verify = (token: Uint8Array, nonce: Uint8Array, mode: KeyMode) => {
    const roots =
      mode === 'test'
        ? [...defaultAppleRoots(), new X509Certificate(ca.rootCert)]
        : defaultAppleRoots();
    return verifyToken(
      { token, expectedNonce: nonce },
      {
        now: () => NOW,
        verifiers: buildVerifiers({ allowlist, appleKeys: keys, appleRoots: roots, mode }),
      },
    );
  };

  it('is a P-384 root and a CA intermediate it signed', () => {
    const root = new X509Certificate(ca.rootCert);
    const intermediate = new X509Certificate(ca.intermediateCert);
    expect(root.ca && intermediate.ca).toBe(true);
    expect(root.publicKey.asymmetricKeyDetails?.namedCurve).toBe('secp384r1');
    expect(intermediate.verify(root.publicKey)).toBe(true);
  });

  it('mints a registration only test mode accepts, then assertions a live key refuses (test-registered key)', async () => {
    const key = createSimulatedKey();
    const nonce = new Uint8Array(32).fill(1);
    const attestation = await mintAttestation(ca, key, {
      appId: APP_ID,
      environment: 'Development',
      clientDataHash: sha256(nonce),
      now: NOW,
    });
    const token = encodeAppleToken({ nonce, keyId: key.keyId, attestation });
    expect(await verify(token, nonce, 'live')).toMatchObject({
      ok: false,
      reason: 'apple_chain_invalid',
    });
    expect(await verify(token, nonce, 'test')).toMatchObject({
      ok: true,
      details: { appleTokenDetails: { environment: 'Development', assertionCounter: 0 } },
    });
    expect(keys.records.get(`test:${Buffer.from(key.keyId).toString('hex')}`)?.mode).toBe('test');

    // the key survives a round trip through its PEM (the device file)
    const reloaded = loadSimulatedKey(
      key.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    );
    expect(Buffer.from(reloaded.keyId)).toEqual(Buffer.from(key.keyId));
    const next = new Uint8Array(32).fill(2);
    const assertion = (counter: number) =>
      encodeAppleToken({
        nonce: next,
        keyId: key.keyId,
        assertion: mintAssertion(reloaded, {
          appId: APP_ID,
          counter,
          clientDataHash: sha256(next),
        }),
      });
    // registrations are kept per mode: a live key does not know a test key's registration
    expect(await verify(assertion(1), next, 'live')).toMatchObject({
      ok: false,
      reason: 'apple_key_unknown',
    });
    expect(await verify(assertion(1), next, 'test')).toMatchObject({
      ok: true,
      details: { appleTokenDetails: { assertionCounter: 1 } },
    });
  });

  it('the deny switches break the check they name', async () => {
    const key = createSimulatedKey();
    const nonce = new Uint8Array(32).fill(3);
    const mint = async (o: { wrongNonce?: boolean; expired?: boolean }) =>
      encodeAppleToken({
        nonce,
        keyId: key.keyId,
        attestation: await mintAttestation(ca, key, {
          appId: APP_ID,
          environment: 'Production',
          clientDataHash: sha256(nonce),
          now: NOW,
          ...o,
        }),
      });
    expect(await verify(await mint({ wrongNonce: true }), nonce, 'test')).toMatchObject({
      ok: false,
      reason: 'apple_nonce_mismatch',
    });
    expect(await verify(await mint({ expired: true }), nonce, 'test')).toMatchObject({
      ok: false,
      reason: 'apple_chain_invalid',
    });
  });
});
