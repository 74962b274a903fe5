import { describe, expect, it } from 'vitest';
import { parseAuthenticatorData } from '../../../src/core/apple/authenticatorData.js';
import { CborError, decodeStrictCborPrefix } from '../../../src/core/cbor.js';
import {
  AAGUID,
  assertionAuthData,
  attestationAuthData,
  coseKey,
  createDeviceKey,
  encodeCbor,
  rawCborMap,
  sha256,
  TEST_APP_ID,
} from '../../support/appleFactory.js';
import { reasonOf } from './helpers.js';

const device = await createDeviceKey();
const rpIdHash = sha256(Buffer.from(TEST_APP_ID));
const fields = {
  rpIdHash,
  flags: 0x40,
  counter: 0,
  aaguid: AAGUID.Production,
  credentialId: device.keyId,
  coseKey: encodeCbor(coseKey(device)),
};
const limits = { maxDepth: 8, maxBytes: 1024 };

describe('decodeStrictCborPrefix', () => {
  it('decodes the first item and reports its length, leaving what follows', () => {
    const bytes = Buffer.concat([encodeCbor(new Map([[1, 2]])), Buffer.from([0xff, 0xee])]);
    const { value, length } = decodeStrictCborPrefix(bytes, limits);
    expect(value).toEqual(new Map([[1, 2]]));
    expect(length).toBe(bytes.length - 2);
  });

  it('keeps the strict rules for the item itself', () => {
    expect(() =>
      decodeStrictCborPrefix(
        rawCborMap([
          [1, 2],
          [1, 3],
        ]),
        limits,
      ),
    ).toThrow(CborError);
    expect(() =>
      decodeStrictCborPrefix(rawCborMap([[1, 2]], { indefinite: true }), limits),
    ).toThrow(CborError);
    expect(() => decodeStrictCborPrefix(Buffer.from([0xc1, 0x00]), limits)).toThrow(CborError); // tag 1
    expect(() => decodeStrictCborPrefix(Buffer.from([0xa1, 0x01]), limits)).toThrow(CborError); // truncated
    expect(() => decodeStrictCborPrefix(new Uint8Array(0), limits)).toThrow(CborError);
  });
});

describe('attestation authData', () => {
  it('reads every field of the attested-credential layout', () => {
    const parsed = parseAuthenticatorData(attestationAuthData(fields), 'attestation');
    expect(Buffer.from(parsed.rpIdHash).equals(rpIdHash)).toBe(true);
    expect(parsed.flags).toBe(0x40);
    expect(parsed.counter).toBe(0);
    expect(Buffer.from(parsed.aaguid).equals(AAGUID.Production)).toBe(true);
    expect(Buffer.from(parsed.credentialId).equals(device.keyId)).toBe(true);
    expect(parsed.credentialPublicKey.get(1)).toBe(2);
    expect(
      Buffer.from(parsed.credentialPublicKey.get(-2) as Uint8Array).equals(
        device.point.subarray(1, 33),
      ),
    ).toBe(true);
    expect(parsed.extensions).toBeNull();
  });

  it('reads the counter as big-endian unsigned 32-bit', () => {
    expect(
      parseAuthenticatorData(attestationAuthData({ ...fields, counter: 0x01020304 }), 'attestation')
        .counter,
    ).toBe(0x01020304);
    expect(
      parseAuthenticatorData(attestationAuthData({ ...fields, counter: 0xfffffffe }), 'attestation')
        .counter,
    ).toBe(4294967294);
  });

  it('reads credential data whatever the flags say (AT clear)', () => {
    const parsed = parseAuthenticatorData(
      attestationAuthData({ ...fields, flags: 0x00 }),
      'attestation',
    );
    expect(Buffer.from(parsed.credentialId).equals(device.keyId)).toBe(true);
  });

  it('accepts iOS 27 extensions after the COSE key with the ED flag clear', () => {
    const extensions = new Map<string, unknown>([
      ['apple_bundle_version_01', '1'],
      ['apple_validation_category_01', Buffer.from('01000000', 'hex')],
    ]);
    const parsed = parseAuthenticatorData(
      attestationAuthData({ ...fields, trailer: encodeCbor(extensions) }),
      'attestation',
    );
    expect(parsed.flags & 0x80).toBe(0);
    expect(parsed.extensions?.get('apple_bundle_version_01')).toBe('1');
    expect(parsed.credentialPublicKey.get(3)).toBe(-7);
  });

  it.each([
    ['shorter than the header', () => Buffer.alloc(36)],
    [
      'cut before the credential ID length',
      () => attestationAuthData(fields).subarray(0, 37 + 16 + 1),
    ],
    [
      'cut inside the credential ID',
      () => attestationAuthData(fields).subarray(0, 37 + 16 + 2 + 10),
    ],
    ['no COSE key', () => attestationAuthData({ ...fields, coseKey: Buffer.alloc(0) })],
    ['cut inside the COSE key', () => attestationAuthData(fields).subarray(0, -3)],
    [
      'COSE key that is not a map',
      () => attestationAuthData({ ...fields, coseKey: encodeCbor(7) }),
    ],
    [
      'COSE key with a duplicate label',
      () =>
        attestationAuthData({
          ...fields,
          coseKey: rawCborMap([
            [1, 2],
            [3, -7],
            [1, 2],
          ]),
        }),
    ],
    [
      'COSE key of indefinite length',
      () =>
        attestationAuthData({
          ...fields,
          coseKey: rawCborMap([...coseKey(device)], { indefinite: true }),
        }),
    ],
    [
      'a byte after the COSE key',
      () => attestationAuthData({ ...fields, trailer: Buffer.from([0x00]) }),
    ],
    [
      'extensions that are not a map',
      () => attestationAuthData({ ...fields, trailer: encodeCbor(['x']) }),
    ],
    [
      'bytes after the extensions map',
      () =>
        attestationAuthData({
          ...fields,
          trailer: Buffer.concat([encodeCbor(new Map([['a', 1]])), Buffer.from([0x01])]),
        }),
    ],
    [
      'extensions with a duplicate key',
      () =>
        attestationAuthData({
          ...fields,
          trailer: rawCborMap([
            ['a', 1],
            ['a', 2],
          ]),
        }),
    ],
  ])('rejects authData %s as a malformed attestation', async (_name, build) => {
    expect(await reasonOf(() => parseAuthenticatorData(build(), 'attestation'))).toBe(
      'apple_attestation_malformed',
    );
  });
});

describe('assertion authenticatorData', () => {
  it('is the 37-byte header even with flag 0x40 (no credential data follows)', () => {
    const parsed = parseAuthenticatorData(
      assertionAuthData({ rpIdHash, flags: 0x40, counter: 7 }),
      'assertion',
    );
    expect(parsed.kind).toBe('assertion');
    expect(parsed.flags).toBe(0x40);
    expect(parsed.counter).toBe(7);
    expect(parsed.extensions).toBeNull();
  });

  it('never reads credential data, whatever the flags', () => {
    const bytes = assertionAuthData({ rpIdHash, flags: 0xc5, counter: 0xffffffff });
    expect(parseAuthenticatorData(bytes, 'assertion').counter).toBe(4294967295);
  });

  it('accepts one extensions map after the header', () => {
    const parsed = parseAuthenticatorData(
      assertionAuthData({
        rpIdHash,
        flags: 0x40,
        counter: 1,
        trailer: encodeCbor(new Map([['k', 'v']])),
      }),
      'assertion',
    );
    expect(parsed.extensions?.get('k')).toBe('v');
  });

  it.each([
    [
      'shorter than 37 bytes',
      () => assertionAuthData({ rpIdHash, flags: 0x40, counter: 1 }).subarray(0, 36),
    ],
    [
      'credential data after the header',
      () =>
        Buffer.concat([
          assertionAuthData({ rpIdHash, flags: 0x40, counter: 1 }),
          AAGUID.Production,
        ]),
    ],
    [
      'a byte after the header',
      () => assertionAuthData({ rpIdHash, flags: 0x40, counter: 1, trailer: Buffer.from([0x00]) }),
    ],
  ])('rejects authenticatorData %s as a malformed assertion', async (_name, build) => {
    expect(await reasonOf(() => parseAuthenticatorData(build(), 'assertion'))).toBe(
      'apple_assertion_malformed',
    );
  });
});
