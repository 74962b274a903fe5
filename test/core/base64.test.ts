import { describe, expect, it } from 'vitest';
import { decodeBase64, encodeBase64, encodeBase64Url } from '../../src/core/base64.js';

const hex = (b: Uint8Array | null) => (b === null ? null : Buffer.from(b).toString('hex'));

describe('decodeBase64 (docs/token-format.md section 1)', () => {
  it('decodes standard base64 with and without padding', () => {
    expect(hex(decodeBase64('AQID'))).toBe('010203');
    expect(hex(decodeBase64('AQI='))).toBe('0102');
    expect(hex(decodeBase64('AQI'))).toBe('0102');
    expect(hex(decodeBase64('AQ=='))).toBe('01');
    expect(hex(decodeBase64('AQ'))).toBe('01');
  });

  it('decodes the URL-safe alphabet, padded or not', () => {
    const bytes = Uint8Array.of(0xfb, 0xff, 0xbf, 0xfe);
    expect(hex(decodeBase64(encodeBase64Url(bytes)))).toBe('fbffbffe');
    expect(encodeBase64Url(bytes)).toMatch(/[-_]/);
    expect(hex(decodeBase64('-_-_'))).toBe(hex(decodeBase64('+/+/')));
    expect(hex(decodeBase64('-_8='))).toBe('fbff');
  });

  it('round-trips every length 1..70 in both alphabets', () => {
    for (let n = 1; n <= 70; n++) {
      const bytes = Uint8Array.from({ length: n }, (_, i) => (i * 37 + n) & 0xff);
      expect(hex(decodeBase64(encodeBase64(bytes)))).toBe(hex(bytes));
      expect(hex(decodeBase64(encodeBase64Url(bytes)))).toBe(hex(bytes));
      expect(hex(decodeBase64(encodeBase64(bytes).replace(/=+$/, '')))).toBe(hex(bytes));
    }
  });

  it('rejects the empty string', () => {
    expect(decodeBase64('')).toBeNull();
  });

  it.each([
    ['whitespace inside', 'AQ ID'],
    ['newline', 'AQID\n'],
    ['leading space', ' AQID'],
    ['a stray character Buffer.from skips', 'AQ*ID'],
    ['non-ASCII', 'AQIDé'],
    ['a dot', 'AQ.D'],
    ['only padding', '=='],
    ['three padding characters', 'AQ==='],
    ['padding in the middle', 'AQ==AQID'],
    ['one character', 'A'],
    ['five characters', 'AQIDB'],
    ['wrong padding count (one where two are due)', 'AQ='],
    ['wrong padding count (two where one is due)', 'AQI=='],
    ['padding after a full quantum', 'AQID='],
    ['padding after a full quantum (two)', 'AQID=='],
    ['mixed alphabets', 'A+_-'],
    ['mixed alphabets, other way', 'a-b/'],
    ['non-zero trailing bits (one byte)', 'AR'],
    ['non-zero trailing bits (one byte, padded)', 'AR=='],
    ['non-zero trailing bits (two bytes)', 'AQJ'],
    ['non-zero trailing bits (two bytes, padded)', 'AQJ='],
  ])('rejects %s: %j', (_why, text) => {
    // Buffer.from would have returned something for most of these
    expect(decodeBase64(text)).toBeNull();
  });

  it('Buffer.from is as lax as the file comment says (the reason the strict decoder exists)', () => {
    expect(Buffer.from('AQ*ID', 'base64').length).toBeGreaterThan(0);
    expect(Buffer.from('AR', 'base64').toString('hex')).toBe('01');
  });

  it('returns a plain Uint8Array view of exactly the decoded bytes', () => {
    const out = decodeBase64('AQID')!;
    expect(out).toBeInstanceOf(Uint8Array);
    expect(out.byteLength).toBe(3);
  });
});
