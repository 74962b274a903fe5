/**
 * The format-1 token envelope (docs/token-format.md section 3), both ways: `parseEnvelope` is what
 * every verification starts with; `encodeEnvelope` is what the device SDK does, and what
 * `attest dev mint`, `attest token wrap` and the tests build their tokens with.
 */
import { Encoder } from 'cbor-x';
import { CborError, decodeStrictCbor, isBytes, isMap } from './cbor.js';
import { Rejection } from './reasons.js';
import type { Service } from './services.js';
import type { TraceRecorder } from './trace.js';

export const TOKEN_MAX_BYTES = 64 * 1024;
export const TOKEN_MAX_DEPTH = 8;
export const TOKEN_NONCE_MIN = 16;
export const TOKEN_NONCE_MAX = 512;
const TELEMETRY_MAX_BYTES = 64;

/** The device telemetry an envelope may carry beside `service`. */
export interface DeviceTelemetry {
  model?: string;
  os?: string;
  sdk?: string;
}

/** The envelope of a format-1 token, with the platform evidence left raw. */
export interface TokenEnvelope {
  version: 1;
  nonce: Uint8Array;
  service: string;
  device: DeviceTelemetry;
  evidence: unknown;
}

// shortest form, byte strings untagged, Maps kept as maps: what device SDKs send
const encoder = new Encoder({
  useRecords: false,
  tagUint8Array: false,
  variableMapSize: true,
  mapsAsObjects: false,
} as never);

/** CBOR-encodes a value as a device would. */
export function encodeCbor(value: unknown): Uint8Array {
  return new Uint8Array(encoder.encode(value));
}

/**
 * A format-1 token: `v`, `nonce`, `device` (its `service` first, then the telemetry given) and the
 * service's evidence under the service's name. `evidence` is written as given (a Map, as devices
 * send it; tests pass anything else to see it refused).
 */
export function encodeEnvelope(parts: {
  /** the final nonce the evidence binds */
  nonce: Uint8Array;
  service: Service;
  evidence: unknown;
  device?: DeviceTelemetry;
}): Uint8Array {
  const deviceMap = new Map<string, string>([['service', parts.service]]);
  for (const [k, v] of Object.entries(parts.device ?? {})) if (v !== undefined) deviceMap.set(k, v);
  return encodeCbor(
    new Map<string, unknown>([
      ['v', 1],
      ['nonce', Buffer.from(parts.nonce)],
      ['device', deviceMap],
      [parts.service, parts.evidence],
    ]),
  );
}

/** Decodes and validates the token envelope; throws `Rejection` (token_malformed / token_version_unsupported). */
export function parseEnvelope(token: Uint8Array, trace?: TraceRecorder): TokenEnvelope {
  trace?.current('token.decode');
  let root: unknown;
  try {
    root = decodeStrictCbor(token, { maxBytes: TOKEN_MAX_BYTES, maxDepth: TOKEN_MAX_DEPTH });
  } catch (err) {
    if (err instanceof CborError) throw new Rejection('token_malformed', `CBOR: ${err.message}`);
    throw err;
  }
  if (!isMap(root)) throw new Rejection('token_malformed', 'the top level is not a CBOR map');
  for (const key of root.keys()) {
    if (typeof key !== 'string')
      throw new Rejection('token_malformed', 'the top-level map has a key that is not text');
  }
  // the version first: another version may lay out everything else differently
  const version = root.get('v');
  const isUint =
    (typeof version === 'number' && Number.isInteger(version) && version >= 0) ||
    (typeof version === 'bigint' && version >= 0n);
  if (!isUint) throw new Rejection('token_malformed', '"v" must be an unsigned integer');
  if (version !== 1) {
    trace?.pass('token.decode', `strict CBOR map, ${token.length} bytes`);
    trace?.current('token.version');
    throw new Rejection(
      'token_version_unsupported',
      `format version ${String(version)} is not supported (only 1)`,
    );
  }
  const nonce = root.get('nonce');
  if (!isBytes(nonce) || nonce.length < TOKEN_NONCE_MIN || nonce.length > TOKEN_NONCE_MAX) {
    throw new Rejection(
      'token_malformed',
      `"nonce" must be a byte string of ${TOKEN_NONCE_MIN} to ${TOKEN_NONCE_MAX} bytes`,
    );
  }
  const device = root.get('device');
  if (!isMap(device)) throw new Rejection('token_malformed', '"device" must be a map');
  const service = device.get('service');
  if (typeof service !== 'string')
    throw new Rejection('token_malformed', '"device.service" must be text');
  const telemetry: TokenEnvelope['device'] = {};
  for (const field of ['model', 'os', 'sdk'] as const) {
    const value = device.get(field);
    if (value === undefined) continue;
    if (typeof value !== 'string' || Buffer.byteLength(value) > TELEMETRY_MAX_BYTES) {
      throw new Rejection(
        'token_malformed',
        `"device.${field}" must be text of at most ${TELEMETRY_MAX_BYTES} bytes`,
      );
    }
    telemetry[field] = value;
  }
  trace?.pass('token.decode', `strict CBOR map, ${token.length} bytes`);
  trace?.pass('token.version', 'format version 1');
  return { version: 1, nonce, service, device: telemetry, evidence: root.get(service) };
}
