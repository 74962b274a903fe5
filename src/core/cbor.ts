/**
 * Strict CBOR decoding for tokens and App Attest objects (docs/token-format.md section 3).
 *
 * Invariants of what `decodeStrictCbor` returns:
 * - the input is exactly one well-formed item: no trailing bytes, no truncation;
 * - no indefinite-length items, no tags (so nothing decodes to Date, Set, records...), no break codes;
 * - no map holds the same key twice (compared by decoded value, so non-shortest encodings of one
 *   key are duplicates too), so a decoy second `authData` can never be picked;
 * - containers nest at most `maxDepth` levels (the top-level item is level 1);
 * - at most `maxItems` items in all (default {@link MAX_ITEMS}): 64 KiB of one-byte empty maps
 *   would otherwise cost cbor-x and the copy below hundreds of milliseconds;
 * - text strings are valid UTF-8;
 * - maps decode to `Map`, byte strings to `Uint8Array`.
 * Non-shortest (but definite) encodings are accepted: cbor-x itself writes 16-bit map sizes.
 *
 * cbor-x does the decoding; the pre-scan below only walks item heads to enforce what cbor-x
 * tolerates (it keeps the last duplicate key and decodes tags).
 */
import { Decoder } from 'cbor-x';

export class CborError extends Error {
  override readonly name = 'CborError';
  constructor(message: string) {
    // an expected refusal of a client's bytes: no stack (see Rejection in reasons.ts)
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message);
    Error.stackTraceLimit = limit;
  }
}

export interface StrictCborOptions {
  maxDepth: number;
  maxBytes: number;
  /** items (of any type, keys included) in the whole input; default {@link MAX_ITEMS} */
  maxItems?: number;
}

/**
 * Far above any token or App Attest object (a token is about 10 items, an attestation about 30),
 * and low enough that any 64 KiB input decodes in a few milliseconds (bench/cborPrescan.bench.ts).
 */
export const MAX_ITEMS = 1024;

/** The pre-scan's running state: items seen against the cap. */
interface Budget {
  items: number;
  readonly maxItems: number;
}

const budget = (options: StrictCborOptions): Budget => ({
  items: 0,
  maxItems: options.maxItems ?? MAX_ITEMS,
});

const decoder = new Decoder({
  mapsAsObjects: false,
  useRecords: false,
  bundleStrings: false,
} as never);
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Decodes one CBOR item under the invariants above; throws `CborError` otherwise. */
export function decodeStrictCbor(bytes: Uint8Array, options: StrictCborOptions): unknown {
  if (bytes.length === 0) throw new CborError('empty input');
  if (bytes.length > options.maxBytes) throw new CborError(`larger than ${options.maxBytes} bytes`);
  const end = scanItem(bytes, 0, 1, options.maxDepth, budget(options));
  if (end !== bytes.length)
    throw new CborError(`${bytes.length - end} trailing bytes after the item`);
  let value: unknown;
  try {
    value = decoder.decode(bytes);
  } catch (err) {
    throw new CborError(`undecodable: ${(err as Error).message}`);
  }
  return normalize(value);
}

function normalize(value: unknown): unknown {
  // cbor-x returns Buffer for byte strings on Node; callers want plain Uint8Array semantics.
  if (Buffer.isBuffer(value))
    return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  // cbor-x gives bigint for any 8-byte head, even `1`: a value must not depend on its (accepted) encoding
  if (
    typeof value === 'bigint' &&
    value >= BigInt(Number.MIN_SAFE_INTEGER) &&
    value <= BigInt(Number.MAX_SAFE_INTEGER)
  )
    return Number(value);
  if (value instanceof Map) {
    const out = new Map<unknown, unknown>();
    for (const [k, v] of value) out.set(normalize(k), normalize(v));
    return out;
  }
  if (Array.isArray(value)) return value.map(normalize);
  return value;
}

interface Head {
  major: number;
  /** argument (length, count or value); -1 for simple values/floats carried inline */
  arg: number;
  next: number;
}

const MAJOR_NAMES = [
  'unsigned integer',
  'negative integer',
  'byte string',
  'text string',
  'array',
  'map',
  'tag',
  'simple value',
];

function readHead(b: Uint8Array, pos: number): Head {
  if (pos >= b.length)
    throw new CborError(`the data ends where an item should start (offset ${pos}): truncated`);
  const initial = b[pos]!;
  const major = initial >> 5;
  const info = initial & 0x1f;
  let p = pos + 1;
  if (info < 24) return { major, arg: info, next: p };
  if (info === 31) {
    throw new CborError(
      major === 7
        ? `a stray "break" byte 0xff at offset ${pos}`
        : `an indefinite-length ${MAJOR_NAMES[major]} at offset ${pos} (only definite lengths are allowed)`,
    );
  }
  if (info > 27)
    throw new CborError(
      `byte 0x${initial.toString(16).padStart(2, '0')} at offset ${pos} starts no CBOR item (length code ${info} is reserved): not CBOR, or corrupted`,
    );
  const size = 1 << (info - 24); // 1, 2, 4, 8
  if (p + size > b.length)
    throw new CborError(
      `the data ends inside the head of the ${MAJOR_NAMES[major]} at offset ${pos}: truncated`,
    );
  let arg = 0;
  for (let i = 0; i < size; i++) arg = arg * 256 + b[p + i]!;
  p += size;
  return { major, arg, next: p };
}

function scanItem(
  b: Uint8Array,
  pos: number,
  depth: number,
  maxDepth: number,
  budget: Budget,
): number {
  if (++budget.items > budget.maxItems) throw new CborError(`more than ${budget.maxItems} items`);
  const { major, arg, next } = readHead(b, pos);
  switch (major) {
    case 0:
    case 1:
      return next;
    case 2:
    case 3: {
      if (arg > b.length - next)
        throw new CborError(
          `a ${MAJOR_NAMES[major]} at offset ${pos} claims ${arg} bytes, more than the ${b.length - next} left: truncated or corrupted`,
        );
      const end = next + arg;
      if (major === 3) {
        try {
          utf8.decode(b.subarray(next, end));
        } catch {
          throw new CborError(`the text string at offset ${pos} is not valid UTF-8`);
        }
      }
      return end;
    }
    case 4: {
      if (depth > maxDepth) throw new CborError(`nested deeper than ${maxDepth} levels`);
      if (arg > b.length - next)
        throw new CborError(
          `an array at offset ${pos} claims ${arg} items, more than the input holds: truncated or corrupted`,
        );
      if (arg > budget.maxItems)
        throw new CborError(
          `an array at offset ${pos} claims ${arg} items, more than the ${budget.maxItems} allowed`,
        );
      let p = next;
      for (let i = 0; i < arg; i++) p = scanItem(b, p, depth + 1, maxDepth, budget);
      return p;
    }
    case 5: {
      if (depth > maxDepth) throw new CborError(`nested deeper than ${maxDepth} levels`);
      if (arg > (b.length - next) / 2)
        throw new CborError(
          `a map at offset ${pos} claims ${arg} entries, more than the input holds: truncated or corrupted`,
        );
      if (arg * 2 > budget.maxItems)
        throw new CborError(
          `a map at offset ${pos} claims ${arg} entries, more than the ${budget.maxItems} items allowed`,
        );
      let p = next;
      const seen = new Set<string>();
      for (let i = 0; i < arg; i++) {
        const keyStart = p;
        p = scanItem(b, p, depth + 1, maxDepth, budget);
        const key = keyIdentity(b.subarray(keyStart, p));
        if (seen.has(key)) throw new CborError(`duplicate map key at offset ${keyStart}`);
        seen.add(key);
        p = scanItem(b, p, depth + 1, maxDepth, budget);
      }
      return p;
    }
    case 6:
      throw new CborError(`tags are not allowed (tag ${arg} at offset ${pos})`);
    default:
      // major 7: false, true, null, undefined and floats; the head already consumed their bytes.
      // Other simple values are unassigned, and cbor-x reads 0-19 as references to "packed values"
      // and throws a plain Error on them (a map key 0xe0 once made verify answer 500).
      if (arg < 20 || (arg >= 24 && (b[pos]! & 0x1f) === 24))
        throw new CborError(`simple value ${arg} at offset ${pos} is not allowed`);
      return next;
  }
}

/** A key's identity by decoded value, so `"a"` in two encodings counts as the same key. */
function keyIdentity(encoded: Uint8Array): string {
  let v: unknown;
  try {
    v = decoder.decode(encoded);
  } catch (err) {
    throw new CborError(`undecodable map key: ${(err as Error).message}`);
  }
  if (typeof v === 'string') return `s:${v}`;
  if (typeof v === 'number' || typeof v === 'bigint') return `n:${String(v)}`;
  if (v instanceof Uint8Array) return `b:${Buffer.from(v).toString('hex')}`;
  return `x:${Buffer.from(encoded).toString('hex')}`;
}

// ---- typed access to decoded maps ----

export function isMap(v: unknown): v is Map<unknown, unknown> {
  return v instanceof Map;
}

export function isBytes(v: unknown): v is Uint8Array {
  return v instanceof Uint8Array;
}

/**
 * Decodes the one strict CBOR item at the start of `bytes` (same invariants as
 * `decodeStrictCbor`, except that bytes may follow it) and says how many bytes it took.
 * For formats that put CBOR items back to back, like App Attest `authData` (COSE key, then
 * an optional extensions map): the caller decides what may follow.
 * @param bytes input whose first item is decoded
 * @param options depth and size limits (`maxBytes` bounds the whole input)
 */
export function decodeStrictCborPrefix(
  bytes: Uint8Array,
  options: StrictCborOptions,
): { value: unknown; length: number } {
  if (bytes.length === 0) throw new CborError('empty input');
  if (bytes.length > options.maxBytes) throw new CborError(`larger than ${options.maxBytes} bytes`);
  const end = scanItem(bytes, 0, 1, options.maxDepth, budget(options));
  let value: unknown;
  try {
    value = decoder.decode(bytes.subarray(0, end));
  } catch (err) {
    throw new CborError(`undecodable: ${(err as Error).message}`);
  }
  return { value: normalize(value), length: end };
}
