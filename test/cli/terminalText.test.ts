import { describe, expect, it } from 'vitest';
import { colorWanted } from '../../src/config.js';
import { jsonSafe, paint, safeText } from '../../src/cli/terminalText.js';
import { HOSTILE, INERT } from '../support/hostileText.js';

describe('safeText', () => {
  it.each(Object.entries(HOSTILE))('shows %s payloads visibly and inertly', (_name, payload) => {
    const out = safeText(payload);
    expect(out).toMatch(INERT);
    expect(out.startsWith('a')).toBe(true);
    expect(out.length).toBeGreaterThan(payload.length); // every character shown, none dropped
  });

  it('names what it escaped', () => {
    expect(safeText('x\u001b[2J\t\n\r\u007f\u009b\u202e\ud800')).toBe(
      'x\\x1B[2J\\t\\n\\r\\x7F\\x9B<U+202E><U+D800>',
    );
  });

  it('leaves ordinary text, accents and emoji alone', () => {
    const text = 'com.example.bänk 6MURL8TA57 ✓ 🍏 日本';
    expect(safeText(text)).toBe(text);
  });
});

describe('jsonSafe', () => {
  it.each(Object.entries(HOSTILE))(
    'escapes %s payloads in JSON text and keeps their value',
    (_name, payload) => {
      const doc = jsonSafe(JSON.stringify({ v: payload, list: [payload] }, null, 2));
      for (const line of doc.split('\n')) expect(line).toMatch(INERT);
      expect(JSON.parse(doc)).toEqual({ v: payload, list: [payload] });
    },
  );

  it('writes \\uXXXX, a surrogate pair beyond the BMP, and leaves other text alone', () => {
    expect(jsonSafe(JSON.stringify('\u009b\u2028\u202e\u{e0001}é🍏'))).toBe(
      '"\\u009b\\u2028\\u202e\\udb40\\udc01é🍏"',
    );
  });
});

describe('colours', () => {
  it('only on a terminal, and not with NO_COLOR', () => {
    expect(colorWanted(true, {})).toBe(true);
    expect(colorWanted(false, {})).toBe(false);
    expect(colorWanted(undefined, {})).toBe(false);
    expect(colorWanted(true, { NO_COLOR: '1' })).toBe(false);
    expect(colorWanted(true, { NO_COLOR: '' })).toBe(true); // no-color.org: empty means unset
  });

  it('wrap text in SGR codes when on, nothing when off', () => {
    expect(paint(true).red('FAIL')).toBe('\u001b[31mFAIL\u001b[39m');
    expect(paint(false).red('FAIL')).toBe('FAIL');
  });
});
