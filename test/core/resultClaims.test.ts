/** The `sub` of a result token for each service: the key or package the verify result is about. */
import { describe, expect, it } from 'vitest';
import { resultClaims } from '../../src/core/resultToken.js';
import type { PlatformDetails } from '../../src/core/kinds.js';

const base = {
  issuer: 'https://attest.example.com',
  apiKeyId: '0h3k5x9q2m7c1b4n',
  approach: 'sessionless' as const,
  nonce: new Uint8Array(32),
  now: 1_767_261_600,
  ttlSeconds: 300,
  jti: 'a1b2c3',
};

describe('resultClaims sub', () => {
  it('android-key: the attested key id (keyIdentifier), with its details as the response has them', () => {
    const androidKeyDetails = {
      keyIdentifier: 'q83vEjRWeJASNFZ4kBI0VniQEjRWeJASNFZ4kBI0Vng=',
      packageName: 'com.example.app',
      securityLevel: 'StrongBox' as const,
      verifiedBootState: 'Verified' as const,
      deviceLocked: true,
      osPatchLevel: 202601,
      attestationVersion: 300,
    };
    const claims = resultClaims({
      ...base,
      details: { service: 'android-key', androidKeyDetails },
    });
    expect(claims.sub).toBe(androidKeyDetails.keyIdentifier);
    expect(claims.service).toBe('android-key');
    expect(claims.details).toEqual(androidKeyDetails);
  });

  it('gms: the package name', () => {
    const claims = resultClaims({
      ...base,
      details: {
        service: 'gms',
        googleTokenDetails: {
          packageName: 'com.example.app',
          deviceIntegrityVerdicts: ['MEETS_DEVICE_INTEGRITY'],
          timestampMillis: 1_767_261_600_000,
        },
      } as PlatformDetails,
    });
    expect(claims.sub).toBe('com.example.app');
  });

  it('a service without a known subject is a fault, never a token about nothing', () => {
    expect(() =>
      resultClaims({
        ...base,
        details: {
          service: 'other',
          otherDetails: { keyIdentifier: 'x' },
        } as unknown as PlatformDetails,
      }),
    ).toThrow(/no subject/);
  });
});
