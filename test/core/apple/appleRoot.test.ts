import { createHash, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  APPLE_APP_ATTESTATION_ROOT_CA_PEM,
  APPLE_APP_ATTESTATION_ROOT_CA_SHA256,
} from '../../../src/core/apple/appleRoot.js';
import { FIXTURES_DIR } from './helpers.js';

describe('built-in Apple App Attestation Root CA', () => {
  const cert = new X509Certificate(APPLE_APP_ATTESTATION_ROOT_CA_PEM);

  it('has the SHA-256 fingerprint Apple publishes', () => {
    const digest = createHash('sha256').update(cert.raw).digest('hex').toUpperCase();
    expect(digest).toBe('1CB9823BA28BA6AD2D33A006941DE2AE4F513EF1D4E831B9F7E0FA7B6242C932');
    expect(APPLE_APP_ATTESTATION_ROOT_CA_SHA256).toBe(digest);
    expect(cert.fingerprint256.replace(/:/g, '')).toBe(digest);
  });

  it('is the certificate of the fixture copy downloaded from apple.com', () => {
    const fixture = new X509Certificate(
      readFileSync(`${FIXTURES_DIR}Apple_App_Attestation_Root_CA.pem`),
    );
    expect(fixture.raw.equals(cert.raw)).toBe(true);
  });

  it('is a self-signed P-384 CA valid from 2020 to 2045', () => {
    expect(cert.ca).toBe(true);
    expect(cert.checkIssued(cert)).toBe(true);
    expect(cert.verify(cert.publicKey)).toBe(true);
    expect(cert.publicKey.asymmetricKeyDetails?.namedCurve).toBe('secp384r1');
    expect(new Date(cert.validFrom).toISOString()).toBe('2020-03-18T18:32:53.000Z');
    expect(new Date(cert.validTo).toISOString()).toBe('2045-03-15T00:00:00.000Z');
  });
});
