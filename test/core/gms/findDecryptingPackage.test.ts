import { beforeAll, describe, expect, it } from 'vitest';
import { findDecryptingPackage } from '../../../src/core/gms/findDecryptingPackage.js';
import type { AndroidPackagePolicy } from '../../../src/core/ports.js';
import {
  createGoogleTestKeys,
  googlePolicy,
  mintIntegrityToken,
  randomNonce,
  type GoogleTestKeys,
} from '../../support/googleFactory.js';

const NOW = new Date('2026-03-01T12:00:00.000Z');
let a: GoogleTestKeys;
let b: GoogleTestKeys;
let bRotated: GoogleTestKeys;
let packages: AndroidPackagePolicy[];

beforeAll(async () => {
  [a, b, bRotated] = await Promise.all([
    createGoogleTestKeys('a'),
    createGoogleTestKeys('b1'),
    createGoogleTestKeys('b2'),
  ]);
  packages = [
    googlePolicy(a, { packageName: 'com.example.a' }),
    googlePolicy([b, bRotated], { packageName: 'com.example.b' }),
  ];
});

describe('findDecryptingPackage', () => {
  it('names the package whose key seals the token, whichever of its pairs', async () => {
    const mint = (keys: GoogleTestKeys) =>
      mintIntegrityToken({ keys, nonce: randomNonce(), now: NOW, packageName: 'com.example.a' });
    expect(await findDecryptingPackage(await mint(bRotated), packages)).toBe('com.example.b');
    expect(await findDecryptingPackage(await mint(a), packages)).toBe('com.example.a');
  });

  it('finds none for a token sealed with unknown keys, outside the pins, or not a JWE', async () => {
    const stranger = await createGoogleTestKeys();
    expect(
      await findDecryptingPackage(
        await mintIntegrityToken({ keys: stranger, nonce: randomNonce(), now: NOW }),
        packages,
      ),
    ).toBeNull();
    expect(
      await findDecryptingPackage(
        await mintIntegrityToken({ keys: a, nonce: randomNonce(), now: NOW, jwe: { alg: 'dir' } }),
        packages,
      ),
    ).toBeNull();
    expect(await findDecryptingPackage('garbage', packages)).toBeNull();
    expect(await findDecryptingPackage('garbage', [])).toBeNull();
  });

  it('changes nothing it is given', async () => {
    const before = structuredClone(packages);
    await findDecryptingPackage(
      await mintIntegrityToken({ keys: b, nonce: randomNonce(), now: NOW }),
      packages,
    );
    expect(packages).toEqual(before);
  });
});
