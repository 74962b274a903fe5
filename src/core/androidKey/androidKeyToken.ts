import { encodeEnvelope, type DeviceTelemetry } from '../envelope.js';

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
  device: DeviceTelemetry = {},
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
  return encodeEnvelope({ nonce: parts.nonce, service: 'android-key', evidence: android, device });
}
