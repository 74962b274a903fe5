import { describe, expect, it } from 'vitest';
import { ownBytes } from '../../src/core/ownBytes.js';

describe('ownBytes', () => {
  it('copies into an ArrayBuffer of exactly its length, apart from the source', () => {
    const body = Buffer.alloc(6000, 7);
    const view = body.subarray(100, 132);
    const pooled = Buffer.from(view);
    // what it replaces: Node's pool gives a small copy a slice of a larger shared buffer
    expect(pooled.buffer.byteLength).toBeGreaterThan(32);
    const own = ownBytes(view);
    expect(own.buffer.byteLength).toBe(32);
    expect(own.byteOffset).toBe(0);
    expect(own.equals(view)).toBe(true);
    body.fill(0);
    expect(own.every((b) => b === 7)).toBe(true);
  });
});
