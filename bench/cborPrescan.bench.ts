/**
 * Cost of the strict CBOR decoder on hostile 64 KiB tokens (shapes with as many items as fit):
 * `npx vitest bench --run --project shared bench/cborPrescan.bench.ts`. Each shape is refused (or decoded) within
 * the item cap; the target is at most 10 ms per token on the 2-core development machine.
 */
import { bench, describe } from 'vitest';
import { decodeStrictCbor } from '../src/core/cbor.js';
import { TOKEN_MAX_BYTES, TOKEN_MAX_DEPTH } from '../src/core/envelope.js';
import {
  arr,
  bstr,
  cat,
  head,
  map,
  tmap,
  tstr,
  uint,
  type Bytes,
} from '../test/support/cborBytes.js';

const LIMIT = TOKEN_MAX_BYTES;
/** A token map whose `x` holds `body`, padded to exactly 64 KiB by the filler item count. */
const tokenAround = (makeBody: (n: number) => Bytes, perItem: number): Bytes => {
  let n = Math.floor((LIMIT - 64) / perItem);
  let body = makeBody(n);
  while (body.length > LIMIT - 32) body = makeBody(--n);
  return tmap({ v: uint(1), x: body });
};

export const SHAPES: Record<string, Bytes> = {
  'array of empty maps': tokenAround((n) => cat(head(4, n), new Uint8Array(n).fill(0xa0)), 1),
  'array of small uints': tokenAround((n) => cat(head(4, n), new Uint8Array(n).fill(0x01)), 1),
  'map of int keys to empty maps': tokenAround(
    (n) =>
      map(Array.from({ length: n }, (_, i) => [uint(i), Uint8Array.of(0xa0)] as [Bytes, Bytes])),
    4,
  ),
  'map of text keys to empty maps': tokenAround(
    (n) =>
      map(
        Array.from(
          { length: n },
          (_, i) => [tstr(i.toString(36)), Uint8Array.of(0xa0)] as [Bytes, Bytes],
        ),
      ),
    6,
  ),
  'nested arrays of empty byte strings': tokenAround(
    (n) =>
      arr(
        Array.from({ length: Math.floor(n / 8) }, () =>
          arr(Array.from({ length: 7 }, () => bstr(new Uint8Array(0)))),
        ),
      ),
    1,
  ),
  // just under the cap, so decoded in full: the most work any 64 KiB token can cause
  'under the cap: 1000 empty maps': tmap({
    v: uint(1),
    x: cat(head(4, 1000), new Uint8Array(1000).fill(0xa0)),
  }),
  'under the cap: 500 long text keys': tmap({
    v: uint(1),
    x: map(
      Array.from(
        { length: 500 },
        (_, i) => [tstr(`${i}`.padStart(120, 'k')), Uint8Array.of(0xa0)] as [Bytes, Bytes],
      ),
    ),
  }),
  'under the cap: 1000 UTF-8 strings': tmap({
    v: uint(1),
    x: arr(Array.from({ length: 1000 }, () => tstr('é'.repeat(30)))),
  }),
};

describe('strict CBOR decode of a hostile 64 KiB token', () => {
  for (const [name, bytes] of Object.entries(SHAPES)) {
    bench(`${name} (${bytes.length} bytes)`, () => {
      try {
        decodeStrictCbor(bytes, { maxBytes: TOKEN_MAX_BYTES, maxDepth: TOKEN_MAX_DEPTH });
      } catch {
        // refused: what is timed is how long refusing takes
      }
    });
  }
});
