import { hash } from 'node:crypto';
import type { webcrypto } from 'node:crypto';
import { LruCache } from '../lruCache.js';
import type { AndroidKeyPair } from '../ports.js';
import { importDecryptionKey, importVerificationKey } from './keyMaterial.js';

/** One allowlisted key pair, imported for jose. A key that would not import is `null`. */
export interface ImportedKeyPair {
  id: string;
  decryptionKey: webcrypto.CryptoKey | null;
  verificationKey: webcrypto.CryptoKey | null;
}

/** Entries kept by default: far more than the key pairs of any real allowlist. */
export const DEFAULT_KEY_CACHE_SIZE = 256;

/**
 * Imported key pairs, kept so that a request costs no key import (WebCrypto `importKey` is
 * several times the price of the AES-KW unwrap itself). Least recently used entries go first
 * once `maxEntries` is reached, so an allowlist that churns cannot grow it without bound.
 *
 * The cache key is a SHA-256 over the pair id and both keys' bytes, not the bytes themselves: a
 * pair that is re-added with other material under the same id is imported afresh, a removed pair
 * simply stops being asked for, and no secret sits in the map as a string.
 */
export class KeyCache {
  private readonly entries: LruCache<string, Promise<ImportedKeyPair>>;
  /**
   * Each pair object's cache key: the allowlist hands out the same (never mutated) pair objects
   * until it reloads, so a request hashes nothing; a reloaded pair is a new object and is hashed
   * once. Weak, so the pairs of a dropped allowlist snapshot are not kept alive by it.
   */
  private readonly keyOf = new WeakMap<AndroidKeyPair, string>();

  /** @param maxEntries the bound (at least 1) */
  constructor(readonly maxEntries: number = DEFAULT_KEY_CACHE_SIZE) {
    if (!Number.isInteger(maxEntries) || maxEntries < 1)
      throw new RangeError('maxEntries must be a positive integer');
    this.entries = new LruCache(maxEntries);
  }

  /** Number of cached pairs (tests and the benchmark). */
  get size(): number {
    return this.entries.size;
  }

  /**
   * The imported form of `pair`, importing it on first use.
   * @param pair an allowlisted key pair
   */
  get(pair: AndroidKeyPair): Promise<ImportedKeyPair> {
    let key = this.keyOf.get(pair);
    if (key === undefined) this.keyOf.set(pair, (key = cacheKey(pair)));
    const hit = this.entries.get(key);
    if (hit) return hit;
    const imported = importKeyPair(pair);
    this.entries.set(key, imported);
    return imported;
  }
}

/**
 * Imports both keys of a pair. Never rejects: a key that does not import (bad material in the
 * store) becomes `null`, so that pair simply opens nothing and the package's other pairs still work.
 * @param pair an allowlisted key pair
 */
export async function importKeyPair(pair: AndroidKeyPair): Promise<ImportedKeyPair> {
  const [decryptionKey, verificationKey] = await Promise.all([
    importDecryptionKey(pair.decryptionKey).catch(() => null),
    importVerificationKey(pair.verificationKey).catch(() => null),
  ]);
  return { id: pair.id, decryptionKey, verificationKey };
}

function cacheKey(pair: AndroidKeyPair): string {
  const parts = [Buffer.from(pair.id, 'utf8'), pair.decryptionKey, pair.verificationKey];
  // length-prefixed, so no two different pairs concatenate to the same input
  const input = Buffer.allocUnsafe(parts.reduce((n, part) => n + 4 + part.length, 0));
  let at = 0;
  for (const part of parts) {
    at = input.writeUInt32BE(part.length, at);
    input.set(part, at);
    at += part.length;
  }
  const key = hash('sha256', input, 'base64');
  input.fill(0); // it held the AES key
  return key;
}
