import { describe, expect, it } from 'vitest';
import { boundLogFields, truncate } from '../../src/server/boundLogFields.js';

describe('boundLogFields', () => {
  it('cuts a 60 KB claimed packageName and keeps the line under 4 KiB', () => {
    const log = {
      requestId: 'r',
      packageName: 'a'.repeat(60_000),
      detail: 'd'.repeat(10_000),
      observed: Array.from({ length: 100 }, () => 'x'.repeat(1000)),
      err: { type: 'Error', message: 'm'.repeat(5000) },
    };
    const bounded = boundLogFields(log);
    expect(bounded.packageName).toBe(`${'a'.repeat(256)}…(60000 chars)`);
    expect(bounded.detail.startsWith('d'.repeat(512) + '…')).toBe(true);
    expect(bounded.observed).toHaveLength(17);
    expect(JSON.stringify({ ...bounded, observed: undefined }).length).toBeLessThan(4096);
  });
  it('leaves short values alone', () => {
    expect(truncate('abc', 3)).toBe('abc');
    expect(boundLogFields({ a: 'x', n: 1, b: true })).toEqual({ a: 'x', n: 1, b: true });
  });
});
