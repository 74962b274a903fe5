/**
 * Algorithm confusion and compact-form abuse. Each case is first shown to be a token that jose
 * would open (or that differs from a valid one only in the aspect under test), so a verifier that
 * forgot a pin would fail here.
 */
import { CompactSign, compactDecrypt, compactVerify, generateKeyPair } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import { createGoogleVerifier } from '../../../src/core/gms/googleVerifier.js';
import { decryptWith, verifyWith } from '../../../src/core/gms/openIntegrityToken.js';
import { createMemoryAllowlist } from '../../../src/core/memoryStores.js';
import type { PlatformVerifier } from '../../../src/core/ports.js';
import {
  createGoogleTestKeys,
  googleEvidence,
  googlePolicy,
  mintIntegrityToken,
  randomNonce,
  rsaKeys,
  runVerifier,
  type GoogleTestKeys,
  type MintOptions,
} from '../../support/googleFactory.js';

const NOW = new Date('2026-03-01T12:00:00.000Z');
const nonce = randomNonce();
let keys: GoogleTestKeys;
let verifier: PlatformVerifier;

beforeAll(async () => {
  keys = await createGoogleTestKeys();
  verifier = createGoogleVerifier({
    allowlist: createMemoryAllowlist({ android: [googlePolicy(keys)] }),
  });
});

async function reasonOf(change: Pick<MintOptions, 'jwe' | 'jws'>): Promise<string> {
  const token = await mintIntegrityToken({ keys, nonce, now: NOW, ...change });
  const run = await runVerifier(verifier, googleEvidence(token), { nonce, now: NOW });
  return run.ok ? 'accepted' : run.reason;
}

it('accepts the baseline A256KW / A256GCM / ES256 token', async () => {
  expect(await reasonOf({})).toBe('accepted');
});

describe('outer JWE: only A256KW with A256GCM', () => {
  it.each<[string, NonNullable<MintOptions['jwe']>]>([
    ['RSA-OAEP', { alg: 'RSA-OAEP' }],
    ['RSA-OAEP-256', { alg: 'RSA-OAEP-256' }],
    ['dir with the AES key as content key', { alg: 'dir' }],
    ['A128KW', { alg: 'A128KW' }],
    ['PBES2 with the AES key as password', { alg: 'PBES2-HS256+A128KW' }],
    ['A256KW with A128GCM', { enc: 'A128GCM' }],
    ['A256KW with A256CBC-HS512', { enc: 'A256CBC-HS512' }],
    ['zip DEF', { zip: true }],
    ['an unknown crit extension', { crit: true }],
    ['a tampered GCM tag', { tamperTag: true }],
    ['a sixth segment', { segments: 6 }],
    ['only four segments', { segments: 4 }],
  ])('rejects %s with gms_decrypt_failed', async (_, jwe) => {
    expect(await reasonOf({ jwe })).toBe('gms_decrypt_failed');
  });

  it('would open dir and zip tokens without the pins (the cases above test the pins)', async () => {
    for (const jwe of [{ alg: 'dir' as const }, { zip: true }]) {
      const token = await mintIntegrityToken({ keys, nonce, now: NOW, jwe });
      await expect(compactDecrypt(token, keys.decryptionKey)).resolves.toHaveProperty('plaintext');
    }
  });
});

describe('inner JWS: only ES256', () => {
  it.each<[string, NonNullable<MintOptions['jws']>]>([
    ['HS256 keyed with the verification key bytes', { alg: 'HS256' }],
    ['alg none', { alg: 'none' }],
    ['ES384', { alg: 'ES384' }],
    ['RS256', { alg: 'RS256' }],
    ['an unknown crit extension', { crit: true }],
    ['only two segments', { segments: 2 }],
    ['a fourth segment', { segments: 4 }],
    ['five segments (a JWE-shaped inner token)', { segments: 5 }],
    ['six segments', { segments: 6 }],
  ])('rejects %s with gms_signature_invalid', async (_, jws) => {
    expect(await reasonOf({ jws })).toBe('gms_signature_invalid');
  });

  it('would verify the HS256 token without the pin (the case above tests the pin)', async () => {
    const token = await mintIntegrityToken({ keys, nonce, now: NOW, jws: { alg: 'HS256' } });
    const { plaintext } = await compactDecrypt(token, keys.decryptionKey);
    await expect(compactVerify(plaintext, keys.verificationKey)).resolves.toHaveProperty('payload');
  });
});

describe('the pins hold whatever key type a pair holds', () => {
  // The verifier's keys are AES-KW and ECDSA P-256, which jose would refuse for other algorithms
  // anyway; these cases hand it keys that do suit the foreign algorithm, so only the pins stop them.
  it('refuses dir even with an AES-GCM key that would open it', async () => {
    const token = await mintIntegrityToken({ keys, nonce, now: NOW, jwe: { alg: 'dir' } });
    const gcmKey = await crypto.subtle.importKey('raw', keys.decryptionKey, 'AES-GCM', false, [
      'decrypt',
    ]);
    expect((await decryptWith(token, gcmKey)).ok).toBe(false);
    await expect(compactDecrypt(token, gcmKey)).resolves.toHaveProperty('plaintext');
  });

  it('refuses RSA-OAEP even with the RSA key that would open it', async () => {
    const token = await mintIntegrityToken({ keys, nonce, now: NOW, jwe: { alg: 'RSA-OAEP' } });
    const { privateKey } = await rsaKeys('RSA-OAEP');
    expect((await decryptWith(token, privateKey)).ok).toBe(false);
    await expect(compactDecrypt(token, privateKey)).resolves.toHaveProperty('plaintext');
  });

  it('refuses HS256 even with the HMAC key that would verify it', async () => {
    const token = await mintIntegrityToken({ keys, nonce, now: NOW, jws: { alg: 'HS256' } });
    const { plaintext } = await compactDecrypt(token, keys.decryptionKey);
    const hmacKey = await crypto.subtle.importKey(
      'raw',
      keys.verificationKey,
      { name: 'HMAC', hash: 'SHA-256' },
      false,
      ['verify'],
    );
    expect((await verifyWith(plaintext, hmacKey)).ok).toBe(false);
    await expect(compactVerify(plaintext, hmacKey)).resolves.toHaveProperty('payload');
  });

  it('refuses ES384 even with the P-384 key that would verify it', async () => {
    const { publicKey, privateKey } = await generateKeyPair('ES384');
    const jws = await new CompactSign(new TextEncoder().encode('{}'))
      .setProtectedHeader({ alg: 'ES384' })
      .sign(privateKey);
    expect((await verifyWith(new TextEncoder().encode(jws), publicKey)).ok).toBe(false);
    await expect(compactVerify(jws, publicKey)).resolves.toHaveProperty('payload');
  });
});
