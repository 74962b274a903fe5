import { decodeBase64 } from '../core/base64.js';
import { decodeStrictCbor, isMap } from '../core/cbor.js';
import { usageError } from './errors.js';
import { readCliFile } from './inputFiles.js';
import { safeText } from './terminalText.js';

/** The most verify-file reads: base64 text of a 64 KiB token, with room for line breaks. */
export const INPUT_MAX_BYTES = 128 * 1024;

const COMPACT_JWE = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]*){4}$/;

/**
 * Reads the token to check, in every input form verify-file knows: a file or stdin (`-`) holding
 * the token's CBOR bytes, its base64 text, or a saved verify request body (whose expectedNonce
 * comes along). Raw platform evidence and empty input are named, with the `attest token wrap`
 * that turns them into a token. Input over {@link INPUT_MAX_BYTES} is refused before it is read
 * (a 100 MB file once took 670 MB of memory). New input forms go here.
 * @param path - the TOKEN argument
 * @throws CliError (exit 2) saying in words what the input is when it is not a token
 */
export async function readTokenInput(
  path: string,
): Promise<{ token: Uint8Array; bodyNonce?: string }> {
  return parseTokenInput(await readBounded(path), path);
}

/** The token in bytes read by verify-file (see {@link readTokenInput}). */
export function parseTokenInput(
  raw: Buffer,
  path: string,
): { token: Uint8Array; bodyNonce?: string } {
  const text = raw.toString('latin1').trim();
  if (text.length === 0)
    throw usageError(
      `${path} is empty: give a file holding the token as CBOR or base64, or a saved verify request body`,
    );
  // a CBOR map starts with major type 5; base64 text never does (it is ASCII)
  if (raw[0]! >> 5 === 5) return { token: notRawEvidence(new Uint8Array(raw), path) };
  if (text.startsWith('{')) return fromRequestBody(raw, path);
  if (COMPACT_JWE.test(text)) {
    throw usageError(
      `${path} holds a raw Play Integrity integrity token (a JWE), not a format-1 token: wrap it with "attest token wrap gms --package <name> --integrity-token ${path} --nonce <b64>"`,
    );
  }
  const bytes = decodeBase64(text.replace(/\s+/g, ''));
  if (!bytes)
    throw usageError(`${path} is neither a CBOR token nor base64 text: ${describeInput(raw)}`);
  return { token: notRawEvidence(bytes, path) };
}

/** verify-file's TOKEN argument, read up to {@link INPUT_MAX_BYTES}. */
export function readBounded(path: string): Promise<Buffer> {
  return readCliFile(path, {
    maxBytes: INPUT_MAX_BYTES,
    what: 'verify-file',
    stdin: true,
    tooLarge: (size) =>
      `${path} is ${size}, more than verify-file reads (${INPUT_MAX_BYTES / 1024} KiB; a token is at most 64 KiB): is it the token?`,
  });
}

const MAJOR_TYPES = [
  'an unsigned integer',
  'a negative integer',
  'a byte string',
  'a text string',
  'an array',
  'a map',
  'a tag',
  'a simple value or float',
];

/** What an input that is not a token looks like, in words. */
function describeInput(raw: Buffer): string {
  const isText = raw.every(
    (b) => b === 0x09 || b === 0x0a || b === 0x0d || (b >= 0x20 && b < 0x7f),
  );
  if (!isText) {
    return `binary data whose first byte 0x${raw[0]!.toString(16).padStart(2, '0')} starts ${MAJOR_TYPES[raw[0]! >> 5]} in CBOR, and a token is a CBOR map (first byte 0xa0 to 0xbb)`;
  }
  const text = raw.toString('latin1').trim();
  if (text.startsWith('{'))
    return 'it looks like JSON; give the token itself (the attestationToken value), not the request body';
  const stray = /[^A-Za-z0-9+/_=\s-]/.exec(text);
  if (stray)
    return `text with "${safeText(stray[0])}" at character ${stray.index + 1}; base64 uses only A-Z a-z 0-9 + / (or - _) and = at the end`;
  return 'text that is not well-formed base64 (its length or padding is wrong)';
}

function fromRequestBody(raw: Buffer, path: string): { token: Uint8Array; bodyNonce?: string } {
  let body: unknown;
  try {
    body = JSON.parse(raw.toString('utf8'));
  } catch {
    throw usageError(
      `${path} starts like JSON but is not valid JSON; give a saved verify request body ({"attestationToken": ...}), CBOR or base64`,
    );
  }
  const b = body as {
    attestationToken?: unknown;
    expectedNonce?: unknown;
    sessionReference?: unknown;
  };
  if (typeof b !== 'object' || b === null || typeof b.attestationToken !== 'string') {
    throw usageError(
      `${path} is JSON without an "attestationToken" string: give a saved verify request body`,
    );
  }
  const token = decodeBase64(b.attestationToken);
  if (!token)
    throw usageError(
      `${path}: "attestationToken" is not base64 (the service answers such a request 400)`,
    );
  if (b.sessionReference !== undefined)
    process.stderr.write(
      'attest: note: the body uses a session: give --server-nonce (and --device-nonce) to check the nonce\n',
    );
  return {
    token: notRawEvidence(token, path),
    ...(typeof b.expectedNonce === 'string' ? { bodyNonce: b.expectedNonce } : {}),
  };
}

/** Refuses an App Attest attestation or assertion object given where a token belongs. */
function notRawEvidence(bytes: Uint8Array, path: string): Uint8Array {
  let value: unknown;
  try {
    value = decodeStrictCbor(bytes, { maxBytes: 64 * 1024, maxDepth: 16 });
  } catch {
    return bytes; // the verification reports what is wrong with it
  }
  if (!isMap(value) || value.has('v')) return bytes;
  if (value.has('fmt') && value.has('attStmt') && value.has('authData')) {
    throw usageError(
      `${path} holds a raw App Attest attestation object, not a format-1 token: wrap it with "attest token wrap apple --key-id <b64> --attestation ${path} --nonce <b64>"`,
    );
  }
  if (value.has('signature') && value.has('authenticatorData')) {
    throw usageError(
      `${path} holds a raw App Attest assertion object, not a format-1 token: wrap it with "attest token wrap apple --key-id <b64> --assertion ${path} --nonce <b64>"`,
    );
  }
  return bytes;
}
