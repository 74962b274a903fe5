/**
 * The outline of a BER value: where each element's header and contents lie, nothing decoded.
 *
 * A receipt must be bounded (depth, element count) before anything reads it, and most of its bytes
 * are certificates that node:crypto reads itself: asn1js builds objects for every element of those
 * (about 0.9 ms for a 4 KiB receipt, more than the whole check's budget) and checks its depth
 * and node limits only while it builds them. This reads tags and lengths only (X.690 8.1.2-8.1.5),
 * refusing at the first element past a limit, so a hostile value costs at most its length in steps;
 * values are decoded by asn1js or node:crypto from the slices it gives.
 */

/** One element: its identifier, where it lies in the input, and its children when constructed. */
export interface BerNode {
  /** 0 universal, 1 application, 2 context-specific, 3 private */
  tagClass: number;
  constructed: boolean;
  tagNumber: number;
  /** offset of the identifier octet */
  start: number;
  /** offset of the first contents octet */
  contentStart: number;
  /** offset just past the contents (before the end-of-contents octets of an indefinite length) */
  contentEnd: number;
  /** offset just past the element */
  end: number;
  indefinite: boolean;
  children: BerNode[];
}

/** How deep and how many elements an outline may hold. */
export interface BerLimits {
  maxDepth: number;
  maxNodes: number;
}

/** A value that is not BER, or is past a limit. */
export class BerError extends Error {}

/**
 * The outline of the one BER element at the start of `bytes` (bytes after it are not read: the
 * caller compares `end` with the length).
 * @param bytes the encoding
 * @param limits the deepest nesting and the most elements accepted
 */
export function outlineBer(bytes: Uint8Array, limits: BerLimits): BerNode {
  let nodes = 0;

  function read(offset: number, limit: number, depth: number): BerNode {
    if (depth > limits.maxDepth) throw new BerError(`nested deeper than ${limits.maxDepth}`);
    if (++nodes > limits.maxNodes) throw new BerError(`more than ${limits.maxNodes} elements`);
    if (offset >= limit) throw new BerError('truncated');
    const id = bytes[offset]!;
    const tagClass = id >> 6;
    const constructed = (id & 0x20) !== 0;
    let tagNumber = id & 0x1f;
    let p = offset + 1;
    if (tagNumber === 0x1f) {
      // high tag number form: base 128, at most three octets here (no CMS tag needs more)
      tagNumber = 0;
      for (let i = 0; ; i++) {
        if (p >= limit || i === 3) throw new BerError('an unreadable tag');
        const b = bytes[p++]!;
        if (i === 0 && b === 0x80) throw new BerError('a tag with a leading zero octet');
        tagNumber = tagNumber * 128 + (b & 0x7f);
        if ((b & 0x80) === 0) break;
      }
    } else if (id === 0) {
      throw new BerError('an end-of-contents where no indefinite length is open');
    }
    if (p >= limit) throw new BerError('truncated');
    const first = bytes[p++]!;
    let length = -1;
    if (first < 0x80) length = first;
    else if (first === 0x80) {
      if (!constructed) throw new BerError('a primitive element with an indefinite length');
    } else {
      const n = first & 0x7f;
      if (n > 3) throw new BerError('a length of more than three octets');
      if (p + n > limit) throw new BerError('truncated');
      length = 0;
      for (let i = 0; i < n; i++) length = length * 256 + bytes[p++]!;
    }
    const node: BerNode = {
      tagClass,
      constructed,
      tagNumber,
      start: offset,
      contentStart: p,
      contentEnd: 0,
      end: 0,
      indefinite: length < 0,
      children: [],
    };
    if (length >= 0) {
      const end = p + length;
      if (end > limit) throw new BerError('truncated');
      if (constructed) {
        let at = p;
        while (at < end) {
          const child = read(at, end, depth + 1);
          node.children.push(child);
          at = child.end;
        }
      }
      node.contentEnd = end;
      node.end = end;
      return node;
    }
    let at = p;
    for (;;) {
      if (at + 2 > limit) throw new BerError('truncated (no end-of-contents)');
      if (bytes[at] === 0 && bytes[at + 1] === 0) break;
      const child = read(at, limit, depth + 1);
      node.children.push(child);
      at = child.end;
    }
    node.contentEnd = at;
    node.end = at + 2;
    return node;
  }

  return read(0, bytes.length, 1);
}

/** Whether `node` is the universal element `tagNumber` (16 SEQUENCE, 17 SET, 6 OID, ...). */
export function isUniversal(node: BerNode | undefined, tagNumber: number): node is BerNode {
  return node !== undefined && node.tagClass === 0 && node.tagNumber === tagNumber;
}

/** Whether `node` is the context-specific element `[tagNumber]`. */
export function isContext(node: BerNode | undefined, tagNumber: number): node is BerNode {
  return node !== undefined && node.tagClass === 2 && node.tagNumber === tagNumber;
}
