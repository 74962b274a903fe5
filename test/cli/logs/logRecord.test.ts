import { describe, expect, it } from 'vitest';
import { formatPlainLine, shortenRoute, fit } from '../../../src/cli/logs/formatLog.js';
import { isRequest, messageLine, parseLogLine } from '../../../src/cli/logs/logRecord.js';
import { plainLine, requestLine } from './sampleLog.js';

describe('parseLogLine', () => {
  it('reads the request fields of a pino line', () => {
    const r = parseLogLine(
      requestLine({
        isValid: false,
        reason: 'apple_counter_replay',
        keyId: 'kid',
        time: '2026-11-22T21:00:00.123Z',
      }),
    );
    expect(r).toMatchObject({
      status: 200,
      service: 'apple',
      isValid: false,
      reason: 'apple_counter_replay',
      keyId: 'kid',
      level: 30,
    });
    expect(r?.timeMs).toBe(Date.parse('2026-11-22T21:00:00.123Z'));
    expect(isRequest(r!)).toBe(true);
  });

  it("accepts pino's default epoch-ms time and label levels", () => {
    const r = parseLogLine('{"level":"warn","time":1795381200123,"msg":"x"}');
    expect(r?.timeMs).toBe(1795381200123);
    expect(r?.level).toBe(40);
    expect(isRequest(r!)).toBe(false);
  });

  it('returns undefined for lines that are not JSON objects, without throwing', () => {
    for (const line of ['Killed', '{"cut":', '42', '"text"', '[1,2]', 'null', '{'])
      expect(parseLogLine(line)).toBeUndefined();
  });

  it('leaves out fields of the wrong type instead of trusting them', () => {
    const r = parseLogLine('{"status":"200","isValid":"false","route":7,"time":"yesterday"}');
    expect(r).toBeDefined();
    expect(r?.status).toBeUndefined();
    expect(r?.isValid).toBeUndefined();
    expect(r?.route).toBeUndefined();
    expect(r?.timeMs).toBeUndefined();
  });

  it('summarises a non-request line as its message, error and scalar fields', () => {
    const r = parseLogLine(
      plainLine(50, 'verify failed', {
        requestId: 'r1',
        err: { type: 'Error', message: 'boom', stack: 'x' },
      }),
    );
    expect(messageLine(r!)).toBe('verify failed err="boom" requestId=r1');
  });
});

describe('formatPlainLine', () => {
  it('prints a request with a fixed set of fields, absent ones as -', () => {
    const raw = requestLine({
      time: '2026-11-22T21:00:00.123Z',
      requestId: 'req-1',
      isValid: false,
      reason: 'apple_counter_replay',
      keyId: 'KID',
    });
    const fields = formatPlainLine({ seq: 0, raw, record: parseLogLine(raw) }).split(/\s+/);
    expect(fields).toEqual([
      '2026-11-22T21:00:00.123Z',
      '200',
      '/api/v1/attestation/verify',
      'apple',
      'invalid',
      'apple_counter_replay',
      'KID',
      'req-1',
    ]);
    const init = requestLine({
      requestId: 'req-2',
      route: '/api/v1/attestation/init',
      isValid: undefined,
      service: undefined,
    });
    expect(
      formatPlainLine({ seq: 1, raw: init, record: parseLogLine(init) }).split(/\s+/),
    ).toHaveLength(8);
  });

  it('prints the package name for Play Integrity, other lines by level and message, raw text as is', () => {
    const gms = requestLine({ service: 'gms', packageName: 'com.example', requestId: 'r' });
    expect(formatPlainLine({ seq: 0, raw: gms, record: parseLogLine(gms) })).toMatch(
      / gms +valid +- +com\.example +r$/,
    );
    const listening = plainLine(30, 'listening', { port: 8080, time: 0 });
    expect(formatPlainLine({ seq: 0, raw: listening, record: parseLogLine(listening) })).toBe(
      '1970-01-01T00:00:00.000Z INFO  listening port=8080',
    );
    expect(formatPlainLine({ seq: 0, raw: '  at foo (x.js:1)' })).toBe('  at foo (x.js:1)');
  });
});

describe('shortenRoute and fit', () => {
  it('drops leading segments to keep the distinguishing end of a route', () => {
    expect(shortenRoute('/api/v1/attestation/verify', 26)).toBe('/api/v1/attestation/verify');
    expect(shortenRoute('/api/v1/attestation/verify', 20)).toBe('…/attestation/verify');
    expect(shortenRoute('/api/v1/attestation/verify', 12)).toBe('…/verify');
    expect(shortenRoute('/averyveryverylongsegment', 8)).toBe('/averyv…');
  });

  it('pads or cuts to an exact width', () => {
    expect(fit('abc', 5)).toBe('abc  ');
    expect(fit('abc', 5, 'right')).toBe('  abc');
    expect(fit('abcdef', 4)).toBe('abc…');
    expect(fit('abc', 0)).toBe('');
  });
});

describe('terminal safety', () => {
  it('neutralises control characters decoded from JSON escapes in plain lines', () => {
    const raw = requestLine({ reason: 'x\u001b[2Jy', isValid: false });
    expect(raw).not.toContain('\u001b'); // JSON keeps it escaped…
    const line = formatPlainLine({ seq: 0, raw, record: parseLogLine(raw) });
    expect(line).not.toContain('\u001b'); // …and the printed line must not unescape it
    expect(line).toContain('x\\x1B[2Jy');
  });
});
