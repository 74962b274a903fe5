import { describe, expect, it } from 'vitest';
import { LineSplitter } from '../../../src/cli/logs/lineSplitter.js';

const bytes = (s: string) => Buffer.from(s, 'utf8');

describe('LineSplitter', () => {
  it('keeps an unfinished line until its newline arrives', () => {
    const s = new LineSplitter();
    expect(s.push(bytes('{"a":1}\n{"b":'))).toEqual(['{"a":1}']);
    expect(s.push(bytes('2}'))).toEqual([]);
    expect(s.push(bytes('\n'))).toEqual(['{"b":2}']);
  });

  it('decodes a UTF-8 character cut by a chunk boundary whole', () => {
    const s = new LineSplitter();
    const line = bytes('détail → ok\n');
    const cut = line.indexOf(0x86); // inside the arrow's three bytes
    expect(s.push(line.subarray(0, cut))).toEqual([]);
    expect(s.push(line.subarray(cut))).toEqual(['détail → ok']);
  });

  it('accepts CRLF and drops blank lines', () => {
    expect(new LineSplitter().push(bytes('a\r\n\r\n  \nb\n'))).toEqual(['a', 'b']);
  });

  it('copies what it keeps, so the caller may reuse its buffer', () => {
    const s = new LineSplitter();
    const buf = bytes('abc');
    s.push(buf);
    buf.fill(0x7a); // "zzz"
    expect(s.push(bytes('d\n'))).toEqual(['abcd']);
  });

  it('gives the unterminated last line on flush, and nothing after reset', () => {
    const s = new LineSplitter();
    s.push(bytes('x\ntail'));
    expect(s.flush()).toEqual(['tail']);
    s.push(bytes('partial'));
    s.reset();
    expect(s.flush()).toEqual([]);
  });

  it('drops the partial first line when reading starts mid-file', () => {
    const s = new LineSplitter({ skipFirstPartialLine: true });
    expect(s.push(bytes('ail of a line\nwhole\n'))).toEqual(['whole']);
  });

  it('cuts an over-long line and drops its rest, keeping memory bounded', () => {
    const s = new LineSplitter({ maxLineBytes: 8 });
    expect(s.push(bytes('0123456'))).toEqual([]);
    expect(s.push(bytes('789abcdef'))).toEqual(['01234567']);
    expect(s.push(bytes('ghij'))).toEqual([]);
    expect(s.push(bytes('klm\nnext\n'))).toEqual(['next']);
    // A long line inside one chunk is cut the same way.
    expect(s.push(bytes('0123456789\nok\n'))).toEqual(['01234567', 'ok']);
  });
});
