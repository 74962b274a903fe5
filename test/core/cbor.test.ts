import { Encoder } from 'cbor-x';
import { describe, expect, it } from 'vitest';
import {
  CborError,
  decodeStrictCbor,
  decodeStrictCborPrefix,
  isBytes,
  isMap,
  MAX_ITEMS,
} from '../../src/core/cbor.js';
import {
  arr,
  bstr,
  cat,
  FLOAT16_ONE,
  head,
  map,
  rawTstr,
  tag,
  tmap,
  tstr,
  uint,
  type Bytes,
} from '../support/cborBytes.js';

const LIMITS = { maxBytes: 64 * 1024, maxDepth: 8 };
const decode = (b: Bytes) => decodeStrictCbor(b, LIMITS);
const rejects = (b: Bytes, message?: RegExp) => {
  let caught: unknown;
  try {
    decode(b);
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(CborError);
  if (message) expect((caught as Error).message).toMatch(message);
};

/** `levels` nested arrays (the outermost is level 1) around a uint */
const nestedArrays = (levels: number) => {
  let item = uint(1);
  for (let i = 0; i < levels; i++) item = arr([item]);
  return item;
};
const nestedMaps = (levels: number) => {
  let item = uint(1);
  for (let i = 0; i < levels; i++) item = tmap({ a: item });
  return item;
};

describe('decodeStrictCbor', () => {
  it('decodes maps to Map, byte strings to Uint8Array, text to string', () => {
    const v = decode(
      tmap({
        b: bstr(Uint8Array.of(1, 2)),
        t: tstr('héllo'),
        n: uint(500),
        l: arr([uint(1), uint(2)]),
      }),
    );
    expect(isMap(v)).toBe(true);
    const m = v as Map<string, unknown>;
    expect(isBytes(m.get('b'))).toBe(true);
    expect(Buffer.isBuffer(m.get('b'))).toBe(false);
    expect([...(m.get('b') as Uint8Array)]).toEqual([1, 2]);
    expect(m.get('t')).toBe('héllo');
    expect(m.get('n')).toBe(500);
    expect(m.get('l')).toEqual([1, 2]);
  });

  it('accepts what cbor-x itself writes (16-bit map sizes) and other non-shortest definite heads', () => {
    const written = new Encoder({ mapsAsObjects: false, useRecords: false } as never).encode(
      new Map([['v', 1]]),
    );
    expect((decode(written) as Map<string, unknown>).get('v')).toBe(1);
    const m = decode(
      map(
        [
          [tstr('a', 2), uint(1, 8)],
          [tstr('b'), head(1, 41, 8)],
        ],
        4,
      ),
    ) as Map<string, unknown>;
    // the value, not its encoding: an 8-byte uint 1 is the number 1, like the shortest form
    expect(m.get('a')).toBe(1);
    expect(m.get('b')).toBe(-42);
    expect(decode(bstr(Uint8Array.of(9), 8))).toEqual(Uint8Array.of(9));
  });

  describe('duplicate keys', () => {
    it('rejects a duplicate text key at the top level', () => {
      rejects(
        map([
          [tstr('a'), uint(1)],
          [tstr('a'), uint(2)],
        ]),
        /duplicate/,
      );
    });
    it('rejects a duplicate whose second copy is a non-shortest encoding', () => {
      rejects(
        map([
          [tstr('a'), uint(1)],
          [tstr('a', 1), uint(2)],
        ]),
        /duplicate/,
      );
      rejects(
        map([
          [tstr('authData', 2), bstr(Uint8Array.of(1))],
          [tstr('authData'), bstr(Uint8Array.of(2))],
        ]),
        /duplicate/,
      );
      rejects(
        map([
          [uint(1), uint(1)],
          [uint(1, 8), uint(2)],
        ]),
        /duplicate/,
      );
    });
    it('rejects duplicates nested deep inside', () => {
      rejects(
        tmap({
          x: arr([
            tmap({
              y: map([
                [bstr(Uint8Array.of(1)), uint(1)],
                [bstr(Uint8Array.of(1)), uint(1)],
              ]),
            }),
          ]),
        }),
        /duplicate/,
      );
    });
    it('keeps keys that merely look alike (text vs bytes, 1 vs -1)', () => {
      const m = decode(
        map([
          [tstr('a'), uint(1)],
          [bstr(Buffer.from('a')), uint(2)],
          [uint(1), uint(3)],
          [head(1, 0), uint(4)],
        ]),
      ) as Map<unknown, unknown>;
      expect(m.size).toBe(4);
    });
  });

  describe('indefinite lengths and break codes', () => {
    it.each([
      ['indefinite map', cat(Uint8Array.of(0xbf), tstr('a'), uint(1), Uint8Array.of(0xff))],
      ['indefinite array', cat(Uint8Array.of(0x9f), uint(1), Uint8Array.of(0xff))],
      [
        'indefinite byte string',
        cat(Uint8Array.of(0x5f), bstr(Uint8Array.of(1)), Uint8Array.of(0xff)),
      ],
      ['indefinite text string', cat(Uint8Array.of(0x7f), tstr('a'), Uint8Array.of(0xff))],
      ['a lone break code', Uint8Array.of(0xff)],
      [
        'indefinite map nested in a map',
        tmap({ a: cat(Uint8Array.of(0xbf), Uint8Array.of(0xff)) }),
      ],
    ])('rejects %s', (_why, bytes) => rejects(bytes, /indefinite|break/));
  });

  describe('tags', () => {
    it.each([
      ['tag 1 (cbor-x makes a Date)', tag(1, uint(1_700_000_000))],
      ['tag 0 (date string)', tag(0, tstr('2026-01-01T00:00:00Z'))],
      ['tag 258 (cbor-x makes a Set)', tag(258, arr([uint(1), uint(2)]))],
      ['tag 2 (bignum)', tag(2, bstr(Uint8Array.of(1, 0)))],
      ['tag 24 (embedded CBOR)', tag(24, bstr(uint(1)))],
      ['tag 55799 (self-describe)', tag(55799, tmap({ a: uint(1) }))],
      ['tag 64 (typed array)', tag(64, bstr(Uint8Array.of(1, 2)))],
      ['cbor-x record tag', tag(0xe000, arr([]))],
      ['a tag nested under a key', tmap({ nonce: tag(1, uint(0)) })],
      ['a tag as a map key', map([[tag(1, uint(0)), uint(1)]])],
    ])('rejects %s', (_why, bytes) => rejects(bytes, /tags/));

    it('really is what cbor-x would decode to a Date or a Set (why the pre-scan matters)', () => {
      const lax = new (require('cbor-x').Decoder)({ mapsAsObjects: false });
      expect(lax.decode(tag(1, uint(1_700_000_000)))).toBeInstanceOf(Date);
      expect(lax.decode(tag(258, arr([uint(1)])))).toBeInstanceOf(Set);
    });
  });

  describe('trailing bytes and truncation', () => {
    it('rejects bytes after the top-level item', () => {
      rejects(cat(tmap({ a: uint(1) }), Uint8Array.of(0x00)), /trailing/);
      rejects(cat(tmap({ a: uint(1) }), tmap({ a: uint(2) })), /trailing/);
    });
    it.each([
      ['empty input', new Uint8Array(0)],
      ['a map short of entries', cat(head(5, 2), tstr('a'), uint(1))],
      ['a byte string shorter than declared', cat(head(2, 10), Uint8Array.of(1, 2))],
      ['a truncated head', Uint8Array.of(0x19, 0x01)],
      ['a truncated 8-byte head', Uint8Array.of(0x5b, 0, 0)],
    ])('rejects %s', (_why, bytes) => rejects(bytes));
  });

  describe('depth (the top-level item is level 1)', () => {
    it('accepts 8 levels of arrays or maps', () => {
      expect(() => decode(nestedArrays(8))).not.toThrow();
      expect(() => decode(nestedMaps(8))).not.toThrow();
      expect(() => decode(tmap({ a: nestedArrays(7) }))).not.toThrow();
    });
    it('rejects 9 levels, even empty, and deep nesting inside a map key', () => {
      rejects(nestedArrays(9), /deeper/);
      rejects(nestedMaps(9), /deeper/);
      let empty = arr([]);
      for (let i = 0; i < 8; i++) empty = arr([empty]);
      rejects(empty, /deeper/);
      rejects(map([[nestedArrays(8), uint(1)]]), /deeper/);
    });
    it('rejects absurd depth without blowing the stack', () => {
      rejects(new Uint8Array(60_000).fill(0x81), /deeper|truncated/);
    });
  });

  describe('size and declared lengths', () => {
    it('accepts exactly 64 KiB and rejects one byte more', () => {
      // a byte string whose encoding (head included) is exactly `total` bytes
      const fill = (total: number) => bstr(new Uint8Array(total - 5), 4);
      expect(fill(65536).length).toBe(65536);
      expect(() => decode(fill(65536))).not.toThrow();
      rejects(fill(65537), /larger/);
    });
    it.each([
      ['a byte string claiming 2^64-1 bytes', cat(head(2, 0xffffffffffffffffn, 8))],
      ['a text string claiming 4 GiB', cat(head(3, 0xffffffff, 4), Uint8Array.of(0x61))],
      ['an array claiming 2^63 items', cat(head(4, 0x8000000000000000n, 8), uint(1))],
      ['a map claiming 2^32-1 entries', cat(head(5, 0xffffffff, 4), tstr('a'), uint(1))],
      [
        'a map claiming more entries than bytes can hold',
        cat(head(5, 3), tstr('a'), uint(1), tstr('b')),
      ],
    ])('rejects %s quickly', (_why, bytes) => {
      const started = performance.now();
      rejects(bytes, /longer than the input|truncated/);
      expect(performance.now() - started).toBeLessThan(2000); // no allocation of the declared size
    });
  });

  describe('text strings', () => {
    it.each([
      ['a lone continuation byte', Uint8Array.of(0x80)],
      ['an overlong encoding', Uint8Array.of(0xc0, 0xaf)],
      ['a UTF-16 surrogate', Uint8Array.of(0xed, 0xa0, 0x80)],
      ['a truncated sequence', Uint8Array.of(0xe2, 0x82)],
      ['a code point past U+10FFFF', Uint8Array.of(0xf4, 0x90, 0x80, 0x80)],
    ])('rejects invalid UTF-8: %s', (_why, raw) => {
      rejects(rawTstr(raw), /UTF-8/);
      rejects(map([[rawTstr(raw), uint(1)]]), /UTF-8/);
      rejects(tmap({ a: arr([rawTstr(raw)]) }), /UTF-8/);
    });
    it('accepts valid multi-byte UTF-8', () => {
      expect(decode(tstr('𝄞 ünï'))).toBe('𝄞 ünï');
    });
  });

  it('rejects reserved additional information 28..30', () => {
    for (const initial of [0x1c, 0x1d, 0x1e, 0x5c, 0xbc, 0xfc])
      rejects(Uint8Array.of(initial, 0, 0, 0, 0, 0, 0, 0, 0));
  });

  it('keeps integers beyond 2^53 exact (bigint)', () => {
    expect(decode(uint(0xffffffffffffffffn))).toBe(0xffffffffffffffffn);
  });

  it('decodes floats as numbers (typed checks are the envelope parser’s job)', () => {
    expect(decode(FLOAT16_ONE)).toBe(1);
  });

  describe('the item cap (any 64 KiB input decodes in a few ms: bench/cborPrescan.bench.ts)', () => {
    const emptyMaps = (n: number) => cat(head(4, n), new Uint8Array(n).fill(0xa0));
    it(`refuses more than ${MAX_ITEMS} items, counted before cbor-x decodes anything`, () => {
      // 48 KiB of empty maps cost 110-200 ms a request before the cap
      rejects(tmap({ v: uint(1), x: emptyMaps(48 * 1024) }), /items/);
      rejects(emptyMaps(MAX_ITEMS), /more than 1024 items/); // the array itself is an item
      rejects(
        tmap({
          x: arr(Array.from({ length: 600 }, () => tmap({}))),
          y: arr(Array.from({ length: 600 }, () => uint(1))),
        }),
        /more than 1024 items/,
      );
      rejects(
        map(Array.from({ length: 600 }, (_, i) => [uint(i), uint(0)] as [Bytes, Bytes])),
        /items allowed/,
      );
      expect(() => decodeStrictCborPrefix(emptyMaps(2000), LIMITS)).toThrow(/items/);
    });
    it('accepts up to the cap, and a lower cap when asked', () => {
      expect((decode(emptyMaps(MAX_ITEMS - 1)) as unknown[]).length).toBe(MAX_ITEMS - 1);
      expect(() => decodeStrictCbor(emptyMaps(10), { ...LIMITS, maxItems: 10 })).toThrow(
        /more than 10 items/,
      );
      expect(decodeStrictCbor(emptyMaps(9), { ...LIMITS, maxItems: 10 })).toHaveLength(9);
    });
  });

  it('says in words what is wrong, with the offset', () => {
    rejects(
      Uint8Array.of(0xbd, 1, 2),
      /byte 0xbd at offset 0 starts no CBOR item .*reserved.*not CBOR/,
    );
    rejects(
      Uint8Array.of(0xa1, 0x62, 0x61),
      /text string at offset 1 claims 2 bytes, more than the 1 left: truncated/,
    );
    rejects(
      cat(Uint8Array.of(0xa1), tstr('a')),
      /ends where an item should start \(offset 3\): truncated/,
    );
    rejects(Uint8Array.of(0x5f, 0xff), /indefinite-length byte string at offset 0/);
    rejects(tmap({ a: tag(1, uint(0)) }), /tag 1 at offset 3/);
  });

  it('refuses unassigned simple values, as keys too, with a CborError (fuzzing found a plain Error, a 500)', () => {
    rejects(Uint8Array.of(0xa1, 0xe0, 0x01), /simple value 0 at offset 1/);
    rejects(Uint8Array.of(0xa1, 0x01, 0xf3), /simple value 19/);
    rejects(Uint8Array.of(0xa1, 0xf8, 0x20, 0x01), /simple value 32/);
    rejects(Uint8Array.of(0xf8, 0xff), /simple value 255/);
    for (const ok of [0xf4, 0xf5, 0xf6, 0xf7])
      expect(() => decode(Uint8Array.of(0xa1, 0x61, 0x61, ok))).not.toThrow();
  });
});

describe('expected rejections carry no stack', () => {
  // capturing one was most of a garbage token's CPU; faults (any other Error) keep theirs
  it('CborError and Rejection have only their first line, and the global limit is restored', async () => {
    const { Rejection } = await import('../../src/core/reasons.js');
    const limit = Error.stackTraceLimit;
    let thrown: unknown;
    try {
      decodeStrictCbor(Uint8Array.of(0xff), { maxBytes: 10, maxDepth: 4 });
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(CborError);
    expect((thrown as Error).stack).toBe(`CborError: ${(thrown as Error).message}`);
    expect(new Rejection('token_malformed', 'bad').stack).toBe('Rejection: token_malformed: bad');
    expect(Error.stackTraceLimit).toBe(limit);
    expect(new Error('fault').stack).toMatch(/\n\s+at /);
  });
});
