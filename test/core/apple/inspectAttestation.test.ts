import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  attestationMadeWith,
  inspectAttestation,
} from '../../../src/core/apple/inspectAttestation.js';
import {
  appAttestNonce,
  nonceExtensionValue,
  readAttestedNonce,
  readNonceExtensionValue,
} from '../../../src/core/apple/nonceExtension.js';
import { b64, loadVectors } from './helpers.js';

const vectors = loadVectors();
const byId = (id: string) => vectors.find((v) => v.id === id)!;

describe('inspectAttestation (verify-file hints)', () => {
  it("reads the leaf's validity period", () => {
    for (const vector of vectors.filter((v) => v.attestation)) {
      const { leafValidity } = inspectAttestation(b64(vector.attestation!));
      expect(leafValidity?.notBefore.toISOString().replace('.000', '')).toBe(vector.leafNotBefore);
      expect(leafValidity?.notAfter.toISOString().replace('.000', '')).toBe(vector.leafNotAfter);
    }
  });

  it("tells which clientDataHash the device used: Apple's sample passed the raw challenge", () => {
    const vector = byId('apple-doc-sample-2024');
    const inspection = inspectAttestation(b64(vector.attestation!));
    const raw = Buffer.from(vector.challenge!, 'utf8');
    expect(attestationMadeWith(inspection, raw)).toBe(true);
    expect(attestationMadeWith(inspection, createHash('sha256').update(raw).digest())).toBe(false);
  });

  it('reports the environment, key id and iOS 27 extensions', () => {
    const vector = byId('apple-doc-sample-2026');
    const inspection = inspectAttestation(b64(vector.attestation!));
    expect(inspection.environment).toBe('Production');
    expect(inspection.leafKeyId?.toString('base64')).toBe(vector.keyId);
    expect(inspection.authData.flags).toBe(0x40);
    expect(inspection.authData.extensions?.get('apple_bundle_version_01')).toBe(
      vector.authDataExtensions!.apple_bundle_version_01,
    );
  });
});

describe('nonce extension', () => {
  it('computes the exact DER value Apple writes into the leaf', () => {
    const vector = byId('veehaitch-ios-14.2');
    const inspection = inspectAttestation(b64(vector.attestation!));
    const leaf = inspection.x5c[0]!;
    const expected = nonceExtensionValue(
      appAttestNonce(inspection.authData.bytes, b64(vector.clientDataHash!)),
    );
    expect(readNonceExtensionValue(leaf)?.equals(expected)).toBe(true);
    expect(readAttestedNonce(leaf)?.equals(expected.subarray(6))).toBe(true);
  });

  it('has no value for a certificate without the extension, or for junk', () => {
    const vector = byId('veehaitch-ios-14.2');
    const intermediate = inspectAttestation(b64(vector.attestation!)).x5c[1]!;
    expect(readNonceExtensionValue(intermediate)).toBeNull();
    expect(readAttestedNonce(Buffer.from('junk'))).toBeNull();
  });

  it('only takes a 32-byte nonce', () => {
    expect(() => nonceExtensionValue(Buffer.alloc(31))).toThrow(RangeError);
  });
});
