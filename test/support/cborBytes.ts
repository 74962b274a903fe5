/**
 * A tiny hand-rolled CBOR writer for tests: every head is written exactly as asked (shortest by
 * default, or a forced width), so hostile encodings (non-shortest keys, indefinite lengths, tags,
 * huge declared lengths) can be built byte by byte without trusting the decoder under test.
 */
export type Bytes = Uint8Array;

/** Width of a head's argument: 0 = shortest, else 1, 2, 4 or 8 bytes after the initial byte. */
export type Width = 0 | 1 | 2 | 4 | 8;

/** One item head: major type and argument. */
export function head(major: number, arg: number | bigint, width: Width = 0): Bytes {
  const n = BigInt(arg);
  let w = width;
  if (w === 0) w = n < 24n ? 0 : n < 0x100n ? 1 : n < 0x10000n ? 2 : n < 0x100000000n ? 4 : 8;
  if (w === 0) return Uint8Array.of((major << 5) | Number(n));
  const info = { 1: 24, 2: 25, 4: 26, 8: 27 }[w];
  const out = new Uint8Array(1 + w);
  out[0] = (major << 5) | info;
  let v = n;
  for (let i = w; i >= 1; i--) {
    out[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  return out;
}

export function cat(...parts: Bytes[]): Bytes {
  return new Uint8Array(Buffer.concat(parts));
}

export const uint = (n: number | bigint, width: Width = 0) => head(0, n, width);
export const nint = (n: number) => head(1, -1 - n);
export const bstr = (b: Bytes, width: Width = 0) => cat(head(2, b.length, width), b);
export const tstr = (s: string, width: Width = 0) => {
  const b = Buffer.from(s, 'utf8');
  return cat(head(3, b.length, width), b);
};
/** A text string with raw (possibly invalid UTF-8) content. */
export const rawTstr = (b: Bytes) => cat(head(3, b.length), b);
export const arr = (items: Bytes[], width: Width = 0) =>
  cat(head(4, items.length, width), ...items);
/** A map from already encoded key/value pairs, in the order given (duplicates allowed). */
export const map = (entries: [Bytes, Bytes][], width: Width = 0) =>
  cat(head(5, entries.length, width), ...entries.flat());
/** A map with text keys. */
export const tmap = (entries: Record<string, Bytes> | [string, Bytes][], width: Width = 0) =>
  map(
    (Array.isArray(entries) ? entries : Object.entries(entries)).map(
      ([k, v]) => [tstr(k), v] as [Bytes, Bytes],
    ),
    width,
  );
export const tag = (n: number, item: Bytes) => cat(head(6, n), item);
export const TRUE = Uint8Array.of(0xf5);
export const FALSE = Uint8Array.of(0xf4);
export const NULL = Uint8Array.of(0xf6);
/** half-precision float 1.0 */
export const FLOAT16_ONE = Uint8Array.of(0xf9, 0x3c, 0x00);
