import { describe, expect, it } from 'vitest';
import {
  compileFilter,
  isFiltering,
  NO_FILTER,
  type LogFilter,
} from '../../../src/cli/logs/logFilter.js';
import { parseLogLine, type LogEntry } from '../../../src/cli/logs/logRecord.js';
import { plainLine, requestLine } from './sampleLog.js';

const entry = (raw: string, seq = 0): LogEntry => ({ seq, raw, record: parseLogLine(raw) });

const lines = {
  appleReplay: entry(
    requestLine({
      isValid: false,
      reason: 'apple_counter_replay',
      service: 'apple',
      apiKeyId: 'k1',
      keyId: 'AbC+/=',
    }),
  ),
  gmsStale: entry(
    requestLine({
      isValid: false,
      reason: 'gms_token_stale',
      service: 'gms',
      apiKeyId: 'k2',
      packageName: 'com.example',
    }),
  ),
  appleValid: entry(requestLine({ isValid: true, service: 'apple', apiKeyId: 'k2' })),
  init: entry(
    requestLine({
      route: '/api/v1/attestation/init',
      isValid: undefined,
      service: undefined,
      apiKeyId: 'k1',
    }),
  ),
  listening: entry(plainLine(30, 'listening', { port: 8080 })),
  garbage: entry('Killed (Apple)'),
};
const all = Object.values(lines);

const names = (filter: LogFilter) => {
  const keep = compileFilter(filter);
  return Object.entries(lines)
    .filter(([, e]) => keep(e))
    .map(([name]) => name);
};

describe('compileFilter', () => {
  it('lets everything through with no filter', () => {
    expect(all.every(compileFilter(NO_FILTER))).toBe(true);
    expect(isFiltering(NO_FILTER)).toBe(false);
  });

  it('keeps only rejections', () => {
    expect(names({ ...NO_FILTER, rejectionsOnly: true })).toEqual(['appleReplay', 'gmsStale']);
  });

  it('filters by reason, service and API key, and combines them', () => {
    expect(names({ ...NO_FILTER, reason: 'gms_token_stale' })).toEqual(['gmsStale']);
    expect(names({ ...NO_FILTER, service: 'apple' })).toEqual(['appleReplay', 'appleValid']);
    expect(names({ ...NO_FILTER, apiKeyId: 'k1' })).toEqual(['appleReplay', 'init']);
    expect(names({ ...NO_FILTER, apiKeyId: 'k2', rejectionsOnly: true })).toEqual(['gmsStale']);
  });

  it('searches the line as written, ignoring case, with regex characters taken literally', () => {
    expect(names({ ...NO_FILTER, search: 'COM.EXAMPLE' })).toEqual(['gmsStale']);
    expect(names({ ...NO_FILTER, search: 'AbC+/=' })).toEqual(['appleReplay']);
    expect(names({ ...NO_FILTER, search: 'apple' })).toEqual([
      'appleReplay',
      'appleValid',
      'garbage',
    ]);
    expect(names({ ...NO_FILTER, search: '.*' })).toEqual([]);
  });

  it('lets lines that are not JSON through a search only', () => {
    expect(names({ ...NO_FILTER, search: 'killed' })).toEqual(['garbage']);
    expect(names({ ...NO_FILTER, search: 'killed', service: 'apple' })).toEqual([]);
  });
});
