import { Fault } from '../core/fault.js';
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

/**
 * Envelope encryption of secrets stored in the database. Each secret gets its own random data
 * key; the data key encrypts the secret and the master key wraps the data key, both with
 * AES-256-GCM and the same associated data (which names the row and column, so a sealed value
 * copied to another row or column does not open). Rotating the master key re-wraps the 32-byte
 * data keys only; the secrets' own ciphertext is never touched.
 *
 * Stored form (one bytea): version 1 | wrap IV (12) | wrapped data key (32) | wrap tag (16) |
 * data IV (12) | ciphertext | data tag (16). The master key id is stored beside it, per row.
 */

export interface MasterKey {
  /** first 8 bytes of SHA-256 of the key, hex: names the key without revealing it */
  id: string;
  key: Uint8Array;
}

export interface Sealed {
  keyId: string;
  ciphertext: Uint8Array;
}

export interface SecretBox {
  /** the key that seals (the first one given) */
  readonly keyId: string;
  /** every key that opens */
  readonly keyIds: readonly string[];
  seal(plaintext: Uint8Array, aad: string): Sealed;
  /** throws SecretOpenError when the key is not held or the value does not authenticate */
  open(sealed: Sealed, aad: string): Uint8Array;
  /** the same secret under the sealing key, re-wrapping only its data key */
  rewrap(sealed: Sealed, aad: string): Sealed;
}

/** A sealed value that cannot be opened: unknown master key, wrong row, or altered bytes. */
export class SecretOpenError extends Fault {
  override readonly name = 'SecretOpenError';
  constructor(
    message: string,
    readonly keyId: string,
  ) {
    super('secret_open', message);
  }
}

export const MASTER_KEY_BYTES = 32;
const VERSION = 1;
const IV = 12;
const TAG = 16;
const DATA_KEY = 32;
const HEADER = 1 + IV + DATA_KEY + TAG;

export function masterKeyId(key: Uint8Array): string {
  return createHash('sha256').update(key).digest().subarray(0, 8).toString('hex');
}

export function toMasterKey(key: Uint8Array): MasterKey {
  if (key.length !== MASTER_KEY_BYTES)
    throw new RangeError(`a master key is ${MASTER_KEY_BYTES} bytes, got ${key.length}`);
  return { id: masterKeyId(key), key: new Uint8Array(key) };
}

/** A box over `keys`: the first seals, all of them open (the rest are previous keys). */
export function createSecretBox(keys: readonly MasterKey[]): SecretBox {
  if (keys.length === 0) throw new RangeError('a secret box needs at least one master key');
  const current = keys[0]!;
  const byId = new Map(keys.map((k) => [k.id, k]));

  const wrapWith = (master: MasterKey, dataKey: Uint8Array, aad: string) =>
    encrypt(master.key, dataKey, aad);
  const unwrap = (sealed: Sealed, aad: string): Uint8Array => {
    const master = byId.get(sealed.keyId);
    if (!master)
      throw new SecretOpenError(
        `the value is sealed with master key ${sealed.keyId}, which is not the one given (${current.id})`,
        sealed.keyId,
      );
    const blob = sealed.ciphertext;
    if (blob.length < HEADER + IV + TAG || blob[0] !== VERSION)
      throw new SecretOpenError(`the sealed value is not in a known format`, sealed.keyId);
    const dataKey = decrypt(master.key, blob.subarray(1, HEADER), aad);
    if (!dataKey)
      throw new SecretOpenError(
        `the sealed value does not open with master key ${sealed.keyId}: altered, or moved from another row`,
        sealed.keyId,
      );
    return dataKey;
  };

  return {
    keyId: current.id,
    keyIds: keys.map((k) => k.id),
    seal(plaintext, aad) {
      const dataKey = randomBytes(DATA_KEY);
      const ciphertext = Buffer.concat([
        Buffer.of(VERSION),
        wrapWith(current, dataKey, aad),
        encrypt(dataKey, plaintext, aad),
      ]);
      dataKey.fill(0);
      return { keyId: current.id, ciphertext: new Uint8Array(ciphertext) };
    },
    open(sealed, aad) {
      const dataKey = unwrap(sealed, aad);
      const plaintext = decrypt(dataKey, sealed.ciphertext.subarray(HEADER), aad);
      dataKey.fill(0);
      if (!plaintext)
        throw new SecretOpenError(
          `the sealed value does not open with master key ${sealed.keyId}: altered`,
          sealed.keyId,
        );
      return plaintext;
    },
    rewrap(sealed, aad) {
      const dataKey = unwrap(sealed, aad);
      const ciphertext = Buffer.concat([
        Buffer.of(VERSION),
        wrapWith(current, dataKey, aad),
        sealed.ciphertext.subarray(HEADER),
      ]);
      dataKey.fill(0);
      return { keyId: current.id, ciphertext: new Uint8Array(ciphertext) };
    },
  };
}

/** IV | ciphertext | tag */
function encrypt(key: Uint8Array, plaintext: Uint8Array, aad: string): Buffer {
  const iv = randomBytes(IV);
  const cipher = createCipheriv('aes-256-gcm', key, iv, { authTagLength: TAG });
  cipher.setAAD(Buffer.from(aad, 'utf8'));
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([iv, body, cipher.getAuthTag()]);
}

function decrypt(key: Uint8Array, blob: Uint8Array, aad: string): Uint8Array | null {
  if (blob.length < IV + TAG) return null;
  const decipher = createDecipheriv('aes-256-gcm', key, blob.subarray(0, IV), {
    authTagLength: TAG,
  });
  decipher.setAAD(Buffer.from(aad, 'utf8'));
  decipher.setAuthTag(blob.subarray(blob.length - TAG));
  try {
    return new Uint8Array(
      Buffer.concat([decipher.update(blob.subarray(IV, blob.length - TAG)), decipher.final()]),
    );
  } catch {
    return null;
  }
}
