import { createPublicKey, type KeyObject } from 'node:crypto';
import { encodeBase64 } from './base64.js';
import { LruCache } from './lruCache.js';
import { ownBytes } from './ownBytes.js';

/**
 * The parsed public keys of registered device keys (App Attest and android-key), most recently
 * used kept: creating a KeyObject from DER costs about three signature checks, and an assertion
 * should cost one.
 */
export class StoredKeyCache {
  private readonly keys: LruCache<string, { spki: Buffer; key: KeyObject }>;

  /**
   * @param capacity the most keys kept
   * @param what the keys' name in a fault's message (`App Attest`, `Android`)
   */
  constructor(
    capacity: number,
    private readonly what: string,
  ) {
    this.keys = new LruCache(capacity);
  }

  /** The KeyObject of a stored key's DER SPKI; unreadable stored bytes are a fault. */
  publicKeyOf(record: { keyId: Uint8Array; publicKey: Uint8Array }): KeyObject {
    const cacheKey = Buffer.from(record.keyId).toString('hex');
    const cached = this.keys.get(cacheKey);
    // the stored bytes are compared so a key replaced in the store is never served from memory
    if (cached && cached.spki.equals(record.publicKey)) return cached.key;
    const spki = ownBytes(record.publicKey);
    let key: KeyObject;
    try {
      key = createPublicKey({ key: spki, format: 'der', type: 'spki' });
    } catch (err) {
      // stored by this service after verification: unreadable means damaged storage, a fault
      throw new Error(
        `stored ${this.what} public key of ${encodeBase64(record.keyId)} is unreadable: ${(err as Error).message}`,
      );
    }
    this.keys.set(cacheKey, { spki, key });
    return key;
  }

  /** Keeps a key just verified at registration, so its first assertion does not parse it again. */
  remember(keyId: Uint8Array, spki: Uint8Array, key: KeyObject): void {
    this.keys.set(Buffer.from(keyId).toString('hex'), { spki: ownBytes(spki), key });
  }
}
