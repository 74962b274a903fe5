import { generateKeyPairSync, randomBytes, type KeyObject } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  parseDecryptionKey,
  parsePlayKeys,
  parseVerificationKey,
} from '../../../src/core/gms/keyMaterial.js';

const spki = (key: KeyObject) => key.export({ format: 'der', type: 'spki' });
const ecSpki = (namedCurve: string) => spki(generateKeyPairSync('ec', { namedCurve }).publicKey);

describe('parseDecryptionKey', () => {
  const key = randomBytes(32);

  it.each([
    ['padded base64', key.toString('base64')],
    ['base64url', key.toString('base64url')],
    ['base64 with a trailing newline', `${key.toString('base64')}\n`],
  ])('reads %s of 32 bytes', (_, text) => {
    expect(parseDecryptionKey(text)).toEqual(new Uint8Array(key));
  });

  it.each([
    ['16 bytes (AES-128)', randomBytes(16).toString('base64')],
    ['33 bytes', randomBytes(33).toString('base64')],
    ['empty text', ''],
    ['hex', key.toString('hex')],
    ['base64 with a bad character', `${key.toString('base64').slice(0, 40)}*AA=`],
  ])('refuses %s', (_, text) => {
    expect(() => parseDecryptionKey(text)).toThrow(Error);
  });
});

describe('parseVerificationKey', () => {
  it('reads an EC P-256 SPKI and returns its DER', () => {
    const der = ecSpki('P-256');
    expect(parseVerificationKey(der.toString('base64'))).toEqual(new Uint8Array(der));
  });

  it('returns the canonical uncompressed form of a compressed P-256 key', () => {
    const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const jwk = publicKey.export({ format: 'jwk' });
    const x = Buffer.from(jwk.x!, 'base64url');
    const y = Buffer.from(jwk.y!, 'base64url');
    const uncompressed = publicKey.export({ format: 'der', type: 'spki' });
    // SPKI header for a compressed P-256 point (RFC 5480), then 0x02/0x03 and X
    const header = Buffer.from('3039301306072a8648ce3d020106082a8648ce3d030107032200', 'hex');
    const compressed = Buffer.concat([header, Buffer.from([0x02 | (y[31]! & 1)]), x]);
    expect(parseVerificationKey(compressed.toString('base64'))).toEqual(
      new Uint8Array(uncompressed),
    );
  });

  it.each([
    ['an RSA key', () => spki(generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey)],
    ['a P-384 key', () => ecSpki('P-384')],
    ['a secp256k1 key', () => ecSpki('secp256k1')],
    ['an Ed25519 key', () => spki(generateKeyPairSync('ed25519').publicKey)],
    [
      'a PKCS#8 private key',
      () =>
        generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({
          format: 'der',
          type: 'pkcs8',
        }),
    ],
    ['random bytes', () => randomBytes(91)],
    ['32 bytes (a decryption key in the wrong place)', () => randomBytes(32)],
  ])('refuses %s', (_, make) => {
    expect(() => parseVerificationKey(make().toString('base64'))).toThrow(Error);
  });

  it('refuses text that is not base64', () => {
    expect(() => parseVerificationKey('MFkw EwYH')).toThrow(Error);
  });
});

describe('parsePlayKeys: the usual mix-ups are named', () => {
  const dec = randomBytes(32).toString('base64');
  const ver = ecSpki('P-256').toString('base64');
  const pem = `-----BEGIN PUBLIC KEY-----\n${ver.match(/.{1,64}/g)!.join('\n')}\n-----END PUBLIC KEY-----\n`;

  it('reads the pair', () => {
    const keys = parsePlayKeys(dec, ver);
    expect(keys.decryptionKey).toEqual(new Uint8Array(Buffer.from(dec, 'base64')));
    expect(keys.verificationKey).toEqual(new Uint8Array(Buffer.from(ver, 'base64')));
  });

  it.each([
    ['swapped keys', ver, dec, /swapped/],
    ['a public key as the decryption key', ver, ver, /decryption key is a public key.*swapped/],
    ['a 32-byte verification key', dec, dec, /verification key is 32 bytes.*swapped/],
    ['a PEM verification key', dec, pem, /verification key is a PEM block/],
    ['a PEM decryption key', pem, ver, /decryption key is a PEM block/],
  ])('%s', (_, d, v, message) => {
    expect(() => parsePlayKeys(d, v)).toThrow(message);
  });
});
