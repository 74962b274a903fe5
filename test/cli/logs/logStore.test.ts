import { describe, expect, it, vi } from 'vitest';
import { LogStore } from '../../../src/cli/logs/logStore.js';
import { plainLine, requestLine } from './sampleLog.js';

const rejected = (reason: string, service = 'apple', apiKeyId = 'key1') =>
  requestLine({ isValid: false, reason, service, apiKeyId });
const valid = (service = 'apple', apiKeyId = 'key1') =>
  requestLine({ isValid: true, service, apiKeyId });

describe('LogStore', () => {
  it('keeps only the last `limit` lines, oldest first, with increasing seq', () => {
    const store = new LogStore(3);
    store.append(['a', 'b']);
    store.append(['c', 'd', 'e']);
    const { entries, received } = store.getSnapshot();
    expect(entries.map((e) => e.raw)).toEqual(['c', 'd', 'e']);
    expect(entries.map((e) => e.seq)).toEqual([2, 3, 4]);
    expect(received).toBe(5);
  });

  it('skips parsing the part of a batch that cannot survive, but still numbers it', () => {
    const store = new LogStore(2);
    store.append(['1', '2', '3', '4', '5']);
    const { entries, received, summary } = store.getSnapshot();
    expect(entries.map((e) => [e.seq, e.raw])).toEqual([
      [3, '4'],
      [4, '5'],
    ]);
    expect(received).toBe(5);
    expect(summary.unparsed).toBe(2);
  });

  it('keeps its counts in step with evictions', () => {
    const store = new LogStore(4);
    store.append([
      rejected('apple_counter_replay'),
      rejected('apple_counter_replay'),
      valid('gms', 'key2'),
      'not json',
    ]);
    let s = store.getSnapshot().summary;
    expect(s.reasons).toEqual([{ name: 'apple_counter_replay', count: 2 }]);
    expect(s.services).toEqual([
      { name: 'apple', total: 2, rejected: 2 },
      { name: 'gms', total: 1, rejected: 0 },
    ]);
    expect(s.unparsed).toBe(1);

    // Two more lines evict both apple rejections.
    store.append([rejected('gms_token_stale', 'gms', 'key2'), plainLine(30, 'listening')]);
    s = store.getSnapshot().summary;
    expect(s.lines).toBe(4);
    expect(s.reasons).toEqual([{ name: 'gms_token_stale', count: 1 }]);
    expect(s.services).toEqual([{ name: 'gms', total: 2, rejected: 1 }]);
    expect(s.apiKeys).toEqual([{ name: 'key2', total: 2, rejected: 1 }]);
    expect(s).toMatchObject({ requests: 2, verifications: 2, rejected: 1, unparsed: 1 });
  });

  it('keeps result-token consumes apart from verifications and sums the observed codes', () => {
    const store = new LogStore(10);
    store.append([
      requestLine({ service: 'gms', isValid: true, observed: ['gms_play_protect'] }),
      requestLine({
        service: 'gms',
        isValid: true,
        observed: ['gms_play_protect', 'gms_device_activity'],
      }),
      requestLine({ service: 'gms', isValid: true }),
      requestLine({ route: '/api/v1/results/consume', isValid: true }),
      requestLine({ route: '/api/v1/results/consume', isValid: false, reason: 'already_used' }),
    ]);
    const s = store.getSnapshot().summary;
    expect(s).toMatchObject({ verifications: 3, rejected: 0, consumes: 2, consumesRefused: 1 });
    expect(s.services).toEqual([{ name: 'gms', total: 3, rejected: 0 }]);
    expect(s.reasons).toEqual([]);
    expect(s.observed).toEqual([
      { name: 'gms_play_protect', count: 2 },
      { name: 'gms_device_activity', count: 1 },
    ]);
  });

  it('counts 4xx and 5xx responses, and verifications without a service as unknown', () => {
    const store = new LogStore(10);
    store.append([
      requestLine({ status: 401, isValid: undefined, service: undefined, apiKeyId: undefined }),
      requestLine({ status: 500, isValid: undefined, service: undefined }),
      requestLine({ isValid: false, reason: 'token_malformed', service: undefined }),
    ]);
    const s = store.getSnapshot().summary;
    expect(s).toMatchObject({ clientErrors: 1, serverErrors: 1, verifications: 1, rejected: 1 });
    expect(s.services).toEqual([{ name: 'unknown', total: 1, rejected: 1 }]);
  });

  it('sorts reasons by count, then name', () => {
    const store = new LogStore(10);
    store.append([rejected('b'), rejected('a'), rejected('c'), rejected('c')]);
    expect(store.getSnapshot().summary.reasons.map((r) => r.name)).toEqual(['c', 'a', 'b']);
  });

  it('returns the same snapshot until something changes, and notifies once per batch', () => {
    const store = new LogStore(10);
    const listener = vi.fn();
    const unsubscribe = store.subscribe(listener);
    const first = store.getSnapshot();
    expect(store.getSnapshot()).toBe(first);
    store.append(['x', 'y', 'z']);
    expect(listener).toHaveBeenCalledTimes(1);
    const second = store.getSnapshot();
    expect(second).not.toBe(first);
    expect(first.entries).toHaveLength(0); // earlier snapshots are not mutated
    store.setStatus({ phase: 'following' });
    expect(listener).toHaveBeenCalledTimes(2);
    expect(store.getSnapshot().status.phase).toBe('following');
    unsubscribe();
    store.append(['w']);
    expect(listener).toHaveBeenCalledTimes(2);
  });

  it('holds memory to the limit over many lines', () => {
    const store = new LogStore(100);
    for (let i = 0; i < 50; i++) store.append(Array.from({ length: 100 }, () => valid()));
    const { entries, summary, received } = store.getSnapshot();
    expect(entries).toHaveLength(100);
    expect(summary.verifications).toBe(100);
    expect(received).toBe(5000);
  });

  it('rejects a limit that is not a positive integer', () => {
    expect(() => new LogStore(0)).toThrow(RangeError);
    expect(() => new LogStore(1.5)).toThrow(RangeError);
  });
});
