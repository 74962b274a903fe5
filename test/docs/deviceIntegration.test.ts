/**
 * docs/device-integration.md's example tokens, read from the document itself: the byte dump's
 * offsets run on without gaps, each line's meaning matches its bytes, the dump equals the base64
 * printed under it, and the service's own token parser reads what the page says.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { encode } from 'cbor-x';
import { describe, expect, it } from 'vitest';
import { isMap } from '../../src/core/cbor.js';
import { parseEnvelope } from '../../src/core/envelope.js';
import { ROOT } from '../support/binary.js';

const DOC = readFileSync(join(ROOT, 'docs', 'device-integration.md'), 'utf8');
const NONCE = Uint8Array.from({ length: 32 }, (_, i) => i);

interface DumpLine {
  offset: number;
  bytes: Uint8Array;
  meaning: string;
}

/** The annotated dump after `<!-- example-token: name -->` and the base64 printed under it. */
function example(name: string): { lines: DumpLine[]; bytes: Uint8Array; base64: string } {
  const at = DOC.indexOf(`<!-- example-token: ${name} -->`);
  expect(at, `no example-token ${name} in the document`).toBeGreaterThan(-1);
  const block = /```text\n(.*?)\n```\s*\nbase64: `([^`]+)`/s.exec(DOC.slice(at))!;
  expect(block).not.toBeNull();
  const [header, ...rows] = block[1]!.split('\n');
  expect(header).toMatch(/^off\s+bytes\s+meaning$/);
  const lines = rows.map((row) => {
    const m = /^(\d+)\s+((?:[0-9a-f]{2} )*[0-9a-f]{2})\s{2,}(.+)$/.exec(row);
    if (!m) throw new Error(`not a dump line: ${row}`);
    return {
      offset: Number(m[1]),
      bytes: Uint8Array.from(m[2]!.split(' '), (h) => parseInt(h, 16)),
      meaning: m[3]!.trim(),
    };
  });
  return {
    lines,
    bytes: new Uint8Array(Buffer.concat(lines.map((l) => l.bytes))),
    base64: block[2]!,
  };
}

/** What each annotated line claims, checked against its bytes with a real CBOR encoder. */
function checkMeanings(lines: DumpLine[]) {
  let checked = 0;
  for (const line of lines) {
    const text = /text\((\d+)\) "([^"]*)"/.exec(line.meaning);
    const pairs = /^map, (\d+) pairs?/.exec(line.meaning);
    const bytes = /^bytes\((\d+)\)/.exec(line.meaning);
    const hex = Buffer.from(line.bytes).toString('hex');
    if (text) {
      expect(Buffer.byteLength(text[2]!), line.meaning).toBe(Number(text[1]));
      expect(hex, line.meaning).toBe(Buffer.from(encode(text[2]!)).toString('hex'));
    } else if (pairs) {
      expect(line.bytes, line.meaning).toEqual(Uint8Array.of(0xa0 + Number(pairs[1])));
    } else if (bytes) {
      // the head cbor-x writes for a byte string of that length (a Buffer: a Uint8Array would get a typed-array tag)
      const head = Buffer.from(encode(Buffer.alloc(Number(bytes[1])))).subarray(
        0,
        line.bytes.length,
      );
      expect(hex, line.meaning).toBe(head.toString('hex'));
    } else continue;
    checked++;
  }
  return checked;
}

describe.each(['gms', 'apple'])('docs/device-integration.md example token %s', (name) => {
  const { lines, bytes, base64 } = example(name);

  it('offsets run on without gaps; the dump is the base64 under it', () => {
    let next = 0;
    for (const line of lines) {
      expect(line.offset, line.meaning).toBe(next);
      next += line.bytes.length;
    }
    expect(Buffer.from(base64, 'base64').equals(Buffer.from(bytes))).toBe(true);
  });

  it('each line says what its bytes are', () => {
    expect(checkMeanings(lines)).toBeGreaterThan(10);
  });

  it('the service parses it as the page describes', () => {
    const envelope = parseEnvelope(bytes);
    expect(envelope.version).toBe(1);
    expect(envelope.nonce).toEqual(NONCE);
    expect(envelope.service).toBe(name);
    const evidence = envelope.evidence;
    if (!isMap(evidence)) throw new Error('evidence is not a map');
    if (name === 'gms') {
      expect(envelope.device).toEqual({ model: 'Pixel 8' });
      expect(evidence.get('packageName')).toBe('com.example.app');
      // a compact JWE has five parts, the first a JOSE header naming the algorithms the service requires
      const jwe = evidence.get('integrityToken') as string;
      expect(jwe.split('.')).toHaveLength(5);
      expect(JSON.parse(Buffer.from(jwe.split('.')[0]!, 'base64url').toString())).toEqual({
        alg: 'A256KW',
        enc: 'A256GCM',
      });
    } else {
      expect(evidence.get('keyId')).toEqual(Uint8Array.from({ length: 32 }, (_, i) => 0xa0 + i));
      expect(evidence.get('assertion')).toBeInstanceOf(Uint8Array);
    }
  });
});
