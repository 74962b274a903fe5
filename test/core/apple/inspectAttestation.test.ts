import {
  ECDH,
  createHash,
  createPublicKey,
  createSecretKey,
  generateKeyPairSync,
  X509Certificate,
} from 'node:crypto';
import {
  appAttestKeyId,
  p256Point,
  p256PointOfSpki,
  p256Spki,
} from '../../../src/core/apple/appAttestKeyId.js';
import * as x509 from '@peculiar/x509';
import { describe, expect, it } from 'vitest';
import {
  attestationMadeWith,
  inspectAttestation,
} from '../../../src/core/apple/inspectAttestation.js';
import {
  APPLE_NONCE_EXTENSION_OID,
  appAttestNonce,
  nonceExtensionValue,
  readAttestedNonce,
  readLeafNonceAndKey,
  readNonceExtensionValue,
} from '../../../src/core/apple/nonceExtension.js';
import { b64, loadVectors } from './helpers.js';

async function selfSigned(extensions: x509.Extension[]): Promise<Buffer> {
  const keys = await crypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, [
    'sign',
    'verify',
  ]);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: '01',
    name: 'CN=nonce extension test',
    notBefore: new Date('2026-01-01T00:00:00Z'),
    notAfter: new Date('2027-01-01T00:00:00Z'),
    keys,
    signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
    extensions,
  });
  return Buffer.from(cert.rawData);
}

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

  it('reads the value of every capture, and of an extension marked critical', async () => {
    for (const vector of vectors.filter((v) => v.attestation && v.clientDataHash)) {
      const inspection = inspectAttestation(b64(vector.attestation!));
      const expected = nonceExtensionValue(
        appAttestNonce(inspection.authData.bytes, b64(vector.clientDataHash!)),
      );
      expect(readNonceExtensionValue(inspection.x5c[0]!)?.toString('hex'), vector.id).toBe(
        expected.toString('hex'),
      );
    }
    const value = nonceExtensionValue(Buffer.alloc(32, 7));
    const critical = await selfSigned([new x509.Extension(APPLE_NONCE_EXTENSION_OID, true, value)]);
    expect(readNonceExtensionValue(critical)?.equals(value)).toBe(true);
    // another extension's OCTET STRING is not taken for the nonce
    const other = await selfSigned([new x509.Extension('1.2.840.113635.100.8.5', false, value)]);
    expect(readNonceExtensionValue(other)).toBeNull();
    // a truncated certificate, bytes after it, or contents asn1js throws on read as none
    expect(readNonceExtensionValue(critical.subarray(0, critical.length - 80))).toBeNull();
    expect(
      readNonceExtensionValue(Buffer.concat([critical, Buffer.from([0x30, 0x00])])),
    ).toBeNull();
    expect(readNonceExtensionValue(Buffer.from('3003180131', 'hex'))).toBeNull();
    expect(readNonceExtensionValue(Buffer.from('180131', 'hex'))).toBeNull();
  });

  it('only takes a 32-byte nonce', () => {
    expect(() => nonceExtensionValue(Buffer.alloc(31))).toThrow(RangeError);
  });
});

describe('appAttestKeyId', () => {
  it("is SHA-256 of the uncompressed P-256 point; the SPKI built from it is OpenSSL's", () => {
    for (let i = 0; i < 20; i++) {
      const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
      const spki = publicKey.export({ type: 'spki', format: 'der' });
      // the point is the last 65 bytes of the SPKI OpenSSL exports
      const point = spki.subarray(spki.length - 65);
      expect(p256Point(publicKey)?.toString('hex')).toBe(point.toString('hex'));
      expect(appAttestKeyId(publicKey)?.toString('hex')).toBe(
        createHash('sha256').update(point).digest('hex'),
      );
      expect(p256Spki(p256Point(publicKey)!).toString('hex')).toBe(spki.toString('hex'));
      expect(p256PointOfSpki(spki)?.toString('hex')).toBe(point.toString('hex'));
    }
  });

  it("reads the leaf's point from its SPKI exactly when p256Point would read the same one", () => {
    for (const vector of vectors.filter((v) => v.attestation)) {
      const leaf = inspectAttestation(b64(vector.attestation!)).x5c[0]!;
      const { spki } = readLeafNonceAndKey(leaf);
      const key = new X509Certificate(leaf).publicKey;
      expect(spki?.equals(key.export({ type: 'spki', format: 'der' })), vector.id).toBe(true);
      expect(p256PointOfSpki(spki!)?.toString('hex'), vector.id).toBe(
        p256Point(key)?.toString('hex'),
      );
    }
    const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const spki = publicKey.export({ type: 'spki', format: 'der' });
    // a compressed point, another curve, bytes around it: left to p256Point
    const short = Buffer.concat([
      Buffer.from('3039301306072a8648ce3d020106082a8648ce3d030107032200', 'hex'),
      ECDH.convertKey(
        p256Point(publicKey)!,
        'prime256v1',
        undefined,
        undefined,
        'compressed',
      ) as Buffer,
    ]);
    expect(createPublicKey({ key: short, format: 'der', type: 'spki' }).asymmetricKeyType).toBe(
      'ec',
    );
    expect(p256PointOfSpki(short)).toBeNull();
    const p384 = generateKeyPairSync('ec', { namedCurve: 'P-384' }).publicKey;
    expect(p256PointOfSpki(p384.export({ type: 'spki', format: 'der' }))).toBeNull();
    expect(p256PointOfSpki(Buffer.concat([spki, Buffer.from([0])]))).toBeNull();
    const hybrid = Buffer.from(spki);
    hybrid[spki.length - 65] = 0x06;
    expect(p256PointOfSpki(hybrid)).toBeNull();
  });

  it('is null for any other key', () => {
    const p384 = generateKeyPairSync('ec', { namedCurve: 'P-384' }).publicKey;
    const k256 = generateKeyPairSync('ec', { namedCurve: 'secp256k1' }).publicKey;
    const ed = generateKeyPairSync('ed25519').publicKey;
    const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey;
    const secret = createSecretKey(Buffer.alloc(32));
    // Node has no JWK form for these curves: null, not a throw
    const brainpool = generateKeyPairSync('ec', { namedCurve: 'brainpoolP256r1' }).publicKey;
    const p224 = generateKeyPairSync('ec', { namedCurve: 'secp224r1' }).publicKey;
    for (const key of [p384, k256, ed, rsa, secret, brainpool, p224])
      expect(appAttestKeyId(key)).toBeNull();
    expect(
      appAttestKeyId(generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey),
    ).toBeNull();
    expect(() => p256Spki(Buffer.alloc(65))).toThrow(RangeError);
  });
});
