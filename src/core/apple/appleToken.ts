import { encodeEnvelope, type DeviceTelemetry } from '../envelope.js';

export interface AppleTokenParts {
  /** the final nonce the evidence binds */
  nonce: Uint8Array;
  keyId: Uint8Array;
  attestation?: Uint8Array;
  assertion?: Uint8Array;
}

/** A format-1 token for the `apple` service. */
export function encodeAppleToken(parts: AppleTokenParts, device: DeviceTelemetry = {}): Uint8Array {
  const apple = new Map<string, unknown>([['keyId', Buffer.from(parts.keyId)]]);
  if (parts.attestation) apple.set('attestation', Buffer.from(parts.attestation));
  if (parts.assertion) apple.set('assertion', Buffer.from(parts.assertion));
  return encodeEnvelope({ nonce: parts.nonce, service: 'apple', evidence: apple, device });
}
