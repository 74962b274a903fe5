import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  createSecretBox,
  masterKeyId,
  SecretOpenError,
  toMasterKey,
} from '../../src/db/secretBox.js';

const key = (fill: number) => toMasterKey(new Uint8Array(32).fill(fill));

describe('secretBox', () => {
  it('names a master key by the first 8 bytes of its SHA-256, in hex', () => {
    const bytes = randomBytes(32);
    expect(masterKeyId(bytes)).toBe(createHash('sha256').update(bytes).digest('hex').slice(0, 16));
    expect(toMasterKey(bytes).id).toBe(masterKeyId(bytes));
    expect(() => toMasterKey(randomBytes(16))).toThrow(/32 bytes/);
  });

  it('seals and opens; the ciphertext holds no plaintext and differs every time', () => {
    const box = createSecretBox([key(1)]);
    const secret = randomBytes(91);
    const a = box.seal(secret, 'row-1');
    const b = box.seal(secret, 'row-1');
    expect(a.keyId).toBe(key(1).id);
    expect(Buffer.from(a.ciphertext).indexOf(secret.subarray(0, 16))).toBe(-1);
    expect(Buffer.from(a.ciphertext).equals(Buffer.from(b.ciphertext))).toBe(false);
    expect(Buffer.from(box.open(a, 'row-1')).equals(secret)).toBe(true);
    expect(Buffer.from(box.open(b, 'row-1')).equals(secret)).toBe(true);
  });

  it('refuses another row’s associated data, an altered byte anywhere, and a key it does not hold', () => {
    const box = createSecretBox([key(1)]);
    const sealed = box.seal(randomBytes(32), 'row-1');
    expect(() => box.open(sealed, 'row-2')).toThrow(SecretOpenError);
    for (let i = 0; i < sealed.ciphertext.length; i++) {
      const altered = new Uint8Array(sealed.ciphertext);
      altered[i]! ^= 0x01;
      expect(() => box.open({ keyId: sealed.keyId, ciphertext: altered }, 'row-1')).toThrow(
        SecretOpenError,
      );
    }
    expect(() =>
      box.open({ keyId: sealed.keyId, ciphertext: sealed.ciphertext.subarray(0, 40) }, 'row-1'),
    ).toThrow(SecretOpenError);
    const other = createSecretBox([key(2)]);
    expect(() => other.open(sealed, 'row-1')).toThrow(
      new RegExp(`sealed with master key ${key(1).id}.*given \\(${key(2).id}\\)`),
    );
    // the same id with other key bytes (a forged id) does not open either
    expect(() => other.open({ keyId: key(2).id, ciphertext: sealed.ciphertext }, 'row-1')).toThrow(
      SecretOpenError,
    );
  });

  it('rewraps under the new key: only the wrapped data key changes, and only the new key opens it', () => {
    const old = createSecretBox([key(1)]);
    const rotating = createSecretBox([key(2), key(1)]);
    const secret = randomBytes(64);
    const sealed = old.seal(secret, 'row-1');
    expect(Buffer.from(rotating.open(sealed, 'row-1')).equals(secret)).toBe(true);
    const rewrapped = rotating.rewrap(sealed, 'row-1');
    expect(rewrapped.keyId).toBe(key(2).id);
    // envelope: the secret's own ciphertext (after the 61-byte header) is untouched
    expect(
      Buffer.from(rewrapped.ciphertext.subarray(61)).equals(
        Buffer.from(sealed.ciphertext.subarray(61)),
      ),
    ).toBe(true);
    expect(
      Buffer.from(rewrapped.ciphertext.subarray(0, 61)).equals(
        Buffer.from(sealed.ciphertext.subarray(0, 61)),
      ),
    ).toBe(false);
    expect(Buffer.from(createSecretBox([key(2)]).open(rewrapped, 'row-1')).equals(secret)).toBe(
      true,
    );
    expect(() => old.open(rewrapped, 'row-1')).toThrow(SecretOpenError);
    expect(() => rotating.rewrap(sealed, 'row-2')).toThrow(SecretOpenError);
  });
});
