/**
 * Builds format-1 tokens (docs/token-format.md section 3) from platform evidence: what the device SDK
 * does, and what `attest dev mint` and `attest token wrap` print.
 */
import { Encoder } from 'cbor-x';

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

export interface AppleTokenParts {
  /** the final nonce the evidence binds */
  nonce: Uint8Array;
  keyId: Uint8Array;
  attestation?: Uint8Array;
  assertion?: Uint8Array;
}

/** A format-1 token for the `apple` service. */
export function encodeAppleToken(
  parts: AppleTokenParts,
  device: { model?: string; os?: string; sdk?: string } = {},
): Uint8Array {
  const apple = new Map<string, unknown>([['keyId', Buffer.from(parts.keyId)]]);
  if (parts.attestation) apple.set('attestation', Buffer.from(parts.attestation));
  if (parts.assertion) apple.set('assertion', Buffer.from(parts.assertion));
  return envelope(parts.nonce, 'apple', apple, device);
}

/** A format-1 token for the `gms` service. */
export function encodeGmsToken(
  parts: { nonce: Uint8Array; packageName: string; integrityToken: string },
  device: { model?: string; os?: string; sdk?: string } = {},
): Uint8Array {
  const gms = new Map<string, unknown>([
    ['packageName', parts.packageName],
    ['integrityToken', parts.integrityToken],
  ]);
  return envelope(parts.nonce, 'gms', gms, device);
}

export interface AndroidKeyTokenParts {
  /** the final nonce the evidence binds */
  nonce: Uint8Array;
  packageName: string;
  keyId: Uint8Array;
  /** registration: leaf first */
  certificateChain?: readonly Uint8Array[];
  /** assertion: the attested key's signature over the nonce */
  signature?: Uint8Array;
}

/** A format-1 token for the `android-key` service. */
export function encodeAndroidKeyToken(
  parts: AndroidKeyTokenParts,
  device: { model?: string; os?: string; sdk?: string } = {},
): Uint8Array {
  const android = new Map<string, unknown>([
    ['packageName', parts.packageName],
    ['keyId', Buffer.from(parts.keyId)],
  ]);
  if (parts.certificateChain)
    android.set(
      'certificateChain',
      parts.certificateChain.map((c) => Buffer.from(c)),
    );
  if (parts.signature) android.set('signature', Buffer.from(parts.signature));
  return envelope(parts.nonce, 'android-key', android, device);
}

function envelope(
  nonce: Uint8Array,
  service: 'apple' | 'gms' | 'android-key',
  evidence: Map<string, unknown>,
  device: Record<string, string | undefined>,
): Uint8Array {
  const deviceMap = new Map<string, string>([['service', service]]);
  for (const [k, v] of Object.entries(device)) if (v !== undefined) deviceMap.set(k, v);
  return encodeCbor(
    new Map<string, unknown>([
      ['v', 1],
      ['nonce', Buffer.from(nonce)],
      ['device', deviceMap],
      [service, evidence],
    ]),
  );
}
