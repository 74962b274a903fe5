/**
 * App Attest `authData` / `authenticatorData` parsing (WebAuthn layout, as Apple fills it).
 *
 * The layout is chosen by the object the bytes came from, never by the flags byte: real devices
 * set flag 0x40 (attested credential data) on assertions that carry none, and from iOS 27
 * attestations carry a CBOR extensions map after the COSE key with the ED flag (0x80) clear.
 * Trusting the flags would reject genuine devices, or let them pick which parser runs.
 */
import { CborError, decodeStrictCborPrefix, isMap } from '../cbor.js';
import { Rejection } from '../reasons.js';

export type AuthenticatorDataKind = 'attestation' | 'assertion';

interface AuthenticatorDataCommon {
  /** the whole authData, as signed / hashed */
  bytes: Uint8Array;
  /** SHA-256 of the App ID */
  rpIdHash: Uint8Array;
  flags: number;
  /** big-endian unsigned 32-bit counter at bytes 33..36 */
  counter: number;
  /** the CBOR extensions map after the fixed part (iOS 27 and later), or `null` */
  extensions: Map<unknown, unknown> | null;
}

/** authData of an attestation object: carries the attested credential. */
export interface AttestationAuthenticatorData extends AuthenticatorDataCommon {
  kind: 'attestation';
  /** 16 bytes naming the environment (`appattestdevelop` or `appattest` + 7 zero bytes) */
  aaguid: Uint8Array;
  credentialId: Uint8Array;
  /** the COSE_Key map; the leaf certificate, not this, is the key the service stores */
  credentialPublicKey: Map<unknown, unknown>;
}

/** authenticatorData of an assertion object: the fixed 37 bytes (and extensions, if any). */
export interface AssertionAuthenticatorData extends AuthenticatorDataCommon {
  kind: 'assertion';
}

const RP_ID_HASH_LENGTH = 32;
const HEADER_LENGTH = 37; // rpIdHash 32, flags 1, counter 4
const AAGUID_LENGTH = 16;
// COSE keys and extension maps are flat; the limit only has to stop hostile nesting
const CBOR_LIMITS = { maxDepth: 8, maxBytes: 64 * 1024 };

/**
 * Parses authData with the layout of the object it came from.
 * Throws `Rejection` with `apple_attestation_malformed` or `apple_assertion_malformed`.
 * @param bytes the authData byte string
 * @param kind `attestation` (attested credential data follows the counter) or `assertion` (it does not)
 */
export function parseAuthenticatorData(
  bytes: Uint8Array,
  kind: 'attestation',
): AttestationAuthenticatorData;
export function parseAuthenticatorData(
  bytes: Uint8Array,
  kind: 'assertion',
): AssertionAuthenticatorData;
export function parseAuthenticatorData(
  bytes: Uint8Array,
  kind: AuthenticatorDataKind,
): AttestationAuthenticatorData | AssertionAuthenticatorData {
  const reason =
    kind === 'attestation' ? 'apple_attestation_malformed' : 'apple_assertion_malformed';
  function fail(detail: string): never {
    throw new Rejection(reason, `${kind} authData: ${detail}`);
  }
  if (bytes.length < HEADER_LENGTH)
    fail(`${bytes.length} bytes, shorter than the ${HEADER_LENGTH}-byte header`);
  const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const common = {
    bytes,
    rpIdHash: bytes.subarray(0, RP_ID_HASH_LENGTH),
    flags: view.readUInt8(RP_ID_HASH_LENGTH),
    counter: view.readUInt32BE(RP_ID_HASH_LENGTH + 1),
  };

  if (kind === 'assertion') {
    return { kind, ...common, extensions: readExtensions(bytes.subarray(HEADER_LENGTH), fail) };
  }

  let pos = HEADER_LENGTH;
  if (bytes.length < pos + AAGUID_LENGTH + 2) fail('truncated before the credential ID length');
  const aaguid = bytes.subarray(pos, pos + AAGUID_LENGTH);
  pos += AAGUID_LENGTH;
  const credentialIdLength = view.readUInt16BE(pos);
  pos += 2;
  if (bytes.length < pos + credentialIdLength) fail('truncated credential ID');
  const credentialId = bytes.subarray(pos, pos + credentialIdLength);
  pos += credentialIdLength;
  if (pos === bytes.length) fail('no credential public key');

  // The COSE key is exactly one strict CBOR item; whatever follows it can only be extensions.
  let coseKey: { value: unknown; length: number };
  try {
    coseKey = decodeStrictCborPrefix(bytes.subarray(pos), CBOR_LIMITS);
  } catch (err) {
    if (err instanceof CborError) fail(`credential public key: ${err.message}`);
    throw err;
  }
  if (!isMap(coseKey.value)) fail('credential public key is not a CBOR map');
  pos += coseKey.length;

  return {
    kind,
    ...common,
    aaguid,
    credentialId,
    credentialPublicKey: coseKey.value,
    extensions: readExtensions(bytes.subarray(pos), fail),
  };
}

/** The optional extensions after the fixed part: nothing, or exactly one strict CBOR map. */
function readExtensions(
  rest: Uint8Array,
  fail: (detail: string) => never,
): Map<unknown, unknown> | null {
  if (rest.length === 0) return null;
  let item: { value: unknown; length: number };
  try {
    item = decodeStrictCborPrefix(rest, CBOR_LIMITS);
  } catch (err) {
    if (err instanceof CborError) return fail(`extensions: ${err.message}`);
    throw err;
  }
  if (!isMap(item.value)) return fail('bytes after the fixed part are not a CBOR extensions map');
  if (item.length !== rest.length)
    return fail(`${rest.length - item.length} trailing bytes after the extensions map`);
  return item.value;
}
