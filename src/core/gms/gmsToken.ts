import { encodeEnvelope, type DeviceTelemetry } from '../envelope.js';

/** A format-1 token for the `gms` service. */
export function encodeGmsToken(
  parts: { nonce: Uint8Array; packageName: string; integrityToken: string },
  device: DeviceTelemetry = {},
): Uint8Array {
  const gms = new Map<string, unknown>([
    ['packageName', parts.packageName],
    ['integrityToken', parts.integrityToken],
  ]);
  return encodeEnvelope({ nonce: parts.nonce, service: 'gms', evidence: gms, device });
}
