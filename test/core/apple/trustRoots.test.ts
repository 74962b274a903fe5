import { generateKeyPairSync } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  APPLE_APP_ATTESTATION_ROOT_CA_PEM,
  APPLE_APP_ATTESTATION_ROOT_CA_SHA256,
} from '../../../src/core/apple/appleRoot.js';
import { defaultAppleRoots, parseTrustRoots } from '../../../src/core/apple/trustRoots.js';
import {
  createAttestation,
  createDeviceKey,
  createTestCa,
  type TestCa,
} from '../../support/appleFactory.js';

let ca: TestCa;
beforeAll(async () => {
  ca = await createTestCa();
});

describe('parseTrustRoots', () => {
  it('reads one root', () => {
    const roots = parseTrustRoots(ca.rootPem);
    expect(roots).toHaveLength(1);
    expect(roots[0]!.raw.equals(ca.root.der)).toBe(true);
  });

  it('reads several roots, ignoring text between the blocks', () => {
    const pem = `# test root\n${ca.rootPem}\nsubject=Apple\n${APPLE_APP_ATTESTATION_ROOT_CA_PEM}`;
    const roots = parseTrustRoots(pem);
    expect(roots.map((r) => r.fingerprint256.replace(/:/g, ''))).toEqual([
      ca.roots[0]!.fingerprint256.replace(/:/g, ''),
      APPLE_APP_ATTESTATION_ROOT_CA_SHA256,
    ]);
  });

  it('refuses a file with no certificate', () => {
    expect(() => parseTrustRoots('')).toThrow();
    expect(() => parseTrustRoots('just some text')).toThrow();
  });

  it('refuses an unreadable certificate', () => {
    expect(() =>
      parseTrustRoots('-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n'),
    ).toThrow();
  });

  it('refuses a file whose second block is cut short', () => {
    expect(() => parseTrustRoots(`${ca.rootPem}\n-----BEGIN CERTIFICATE-----\nMIIB`)).toThrow();
  });

  it('refuses a PEM block that is not a certificate (a private key pasted by mistake)', () => {
    const key = generateKeyPairSync('ec', { namedCurve: 'P-256' })
      .privateKey.export({ type: 'pkcs8', format: 'pem' })
      .toString();
    expect(() => parseTrustRoots(`${ca.rootPem}\n${key}`)).toThrow();
  });

  it('refuses a certificate that is not a CA', async () => {
    const { leafDer } = await createAttestation(ca, await createDeviceKey());
    const pem = `-----BEGIN CERTIFICATE-----\n${leafDer.toString('base64')}\n-----END CERTIFICATE-----\n`;
    expect(() => parseTrustRoots(pem)).toThrow();
  });
});

describe('defaultAppleRoots', () => {
  it('is the built-in Apple root, alone', () => {
    const roots = defaultAppleRoots();
    expect(roots).toHaveLength(1);
    expect(roots[0]!.fingerprint256.replace(/:/g, '')).toBe(APPLE_APP_ATTESTATION_ROOT_CA_SHA256);
    expect(defaultAppleRoots()).toBe(roots);
  });
});
