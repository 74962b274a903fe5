/**
 * Everything the HTTP benchmark sends, made at run time: a test App Attest CA (the server trusts it
 * through ATTEST_APPLE_ROOT_CA), device keys and their attestations, assertions made on demand,
 * and Play Integrity tokens minted with generated keys. Built on the test factories.
 */
import { randomBytes } from 'node:crypto';
import {
  createAssertion,
  createAttestation,
  createDeviceKey,
  createTestCa,
  encodeAppleToken,
  type DeviceKey,
  type TestCa,
} from '../../test/support/appleFactory.js';
import { encodeEnvelope } from '../../src/core/envelope.js';
import {
  createGoogleTestKeys,
  mintIntegrityToken,
  TEST_CERT_DIGEST,
  TEST_PACKAGE,
  type GoogleTestKeys,
} from '../../test/support/googleFactory.js';

import {
  androidAssertion,
  androidRegistration,
  createAndroidTestCa,
  type AndroidTestCa,
} from '../../test/support/androidFactory.js';
import type { AndroidDeviceKey } from '../../src/core/dev/androidKeyMint.js';

export { TEST_APP_ID } from '../../test/support/appleFactory.js';
export { TEST_PACKAGE };

const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');
const HOUR = 3_600_000;

export interface Material {
  ca: TestCa;
  google: GoogleTestKeys;
  /** the android-key test CA (the server trusts it through ATTEST_ANDROID_ROOT_CA) */
  android: AndroidTestCa;
}

export async function createMaterial(): Promise<Material> {
  return {
    ca: await createTestCa(),
    google: await createGoogleTestKeys('bench'),
    android: await createAndroidTestCa(),
  };
}

/** Its own package: the Play Integrity one lists a signing certificate digest the factory's apps lack. */
export const ANDROID_PACKAGE = 'com.example.keyattest';

/** A sessionless android-key registration body: a fresh P-256 key attested under the test CA. */
export async function androidRegistrationBody(
  m: Material,
): Promise<{ device: AndroidDeviceKey; body: string }> {
  const nonce = randomBytes(32);
  const { token, device } = await androidRegistration(m.android, {
    nonce,
    packageName: ANDROID_PACKAGE,
  });
  return {
    device,
    body: JSON.stringify({ attestationToken: b64(token), expectedNonce: b64(nonce) }),
  };
}

/** A sessionless android-key assertion body: the key's signature over a fresh nonce. */
export function androidAssertionBody(device: AndroidDeviceKey): string {
  const nonce = randomBytes(32);
  return JSON.stringify({
    attestationToken: b64(androidAssertion(device, nonce, { packageName: ANDROID_PACKAGE })),
    expectedNonce: b64(nonce),
  });
}

/** `attest allowlist add android` arguments for the generated keys. */
export function androidAllowlistArgs(m: Material): string[] {
  return [
    'allowlist',
    'add',
    'android',
    TEST_PACKAGE,
    '--decryption-key',
    b64(m.google.decryptionKey),
    '--verification-key',
    b64(m.google.verificationKey),
    '--cert-digest',
    Buffer.from(TEST_CERT_DIGEST).toString('hex'),
  ];
}

/** A sessionless registration body for a fresh device key, plus the key for later assertions. */
export async function registration(m: Material): Promise<{ device: DeviceKey; body: string }> {
  const device = await createDeviceKey();
  const nonce = randomBytes(32);
  // the leaf must be valid at the server's real clock, not the factory's fixed instant
  const now = Date.now();
  const attestation = (
    await createAttestation(m.ca, device, {
      nonce,
      leafValidity: { notBefore: new Date(now - HOUR), notAfter: new Date(now + 24 * HOUR) },
    })
  ).attestation;
  return {
    device,
    body: JSON.stringify({
      attestationToken: b64(encodeAppleToken({ nonce, keyId: device.keyId, attestation })),
      expectedNonce: b64(nonce),
    }),
  };
}

/** The token of an assertion by `device` with `counter` over `nonce`, base64. */
export function assertionToken(device: DeviceKey, nonce: Uint8Array, counter: number): string {
  return b64(
    encodeAppleToken({
      nonce,
      keyId: device.keyId,
      assertion: createAssertion(device, { nonce, counter }).assertion,
    }),
  );
}

/** A sessionless assertion body (a fresh nonce each time). */
export function assertionBody(device: DeviceKey, counter: number): string {
  const nonce = randomBytes(32);
  return JSON.stringify({
    attestationToken: assertionToken(device, nonce, counter),
    expectedNonce: b64(nonce),
  });
}

/** A sessionless Play Integrity body; reusable (sessionless Play Integrity keeps no state). */
export async function playIntegrityBody(m: Material): Promise<string> {
  const nonce = randomBytes(32);
  const token = await mintIntegrityToken({ keys: m.google, nonce, now: new Date() });
  const cbor = encodeEnvelope({
    nonce,
    service: 'gms',
    evidence: new Map([
      ['packageName', TEST_PACKAGE],
      ['integrityToken', token],
    ]),
  });
  return JSON.stringify({ attestationToken: b64(cbor), expectedNonce: b64(nonce) });
}

/** A well-formed request whose token is random bytes: rejected. */
export function garbageBody(): string {
  return JSON.stringify({
    attestationToken: b64(randomBytes(600)),
    expectedNonce: b64(randomBytes(32)),
  });
}
