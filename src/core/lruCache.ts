/**
 * A bounded map that forgets its least recently used entry when full: every cache whose keys come
 * from clients (parsed App Attest keys, verified intermediates, imported Play key pairs, API key
 * verdicts and failure windows) is one, so memory stays bounded whatever clients send.
 */
export class LruCache<K, V> {
  private readonly entries = new Map<K, V>();

  /** @param capacity the most entries kept (at least 1) */
  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1)
      throw new RangeError('LruCache capacity must be a positive integer');
  }

  /** How many entries are held. */
  get size(): number {
    return this.entries.size;
  }

  /** The entry for `key`, now the most recently used; `undefined` when absent. */
  get(key: K): V | undefined {
    const value = this.entries.get(key);
    if (value === undefined) return undefined;
    // Map keeps insertion order: re-inserting moves the entry to the "recent" end
    this.entries.delete(key);
    this.entries.set(key, value);
    return value;
  }

  /** Stores `value` as the most recently used entry, dropping the least recently used one when full. */
  set(key: K, value: V): void {
    this.entries.delete(key);
    this.entries.set(key, value);
    if (this.entries.size > this.capacity) {
      const oldest = this.entries.keys().next();
      if (!oldest.done) this.entries.delete(oldest.value);
    }
  }

  /** Drops the entry for `key`, if any (for callers that revoke what they cached). */
  delete(key: K): void {
    this.entries.delete(key);
  }

  /** Drops every entry. */
  clear(): void {
    this.entries.clear();
  }

  /** The entries, least recently used first (a snapshot: deleting while iterating is safe). */
  *[Symbol.iterator](): IterableIterator<[K, V]> {
    yield* [...this.entries];
  }
}
