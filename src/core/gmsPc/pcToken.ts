import { encodeEnvelope } from '../envelope.js';

/** A format-1 `gms-pc` token: `device.service` "gms-pc" and the `gms-pc` map the verifier reads. */
export function encodeGmsPcToken(parts: {
  nonce: Uint8Array;
  packageName: string;
  integrityToken: string;
}): Uint8Array {
  return encodeEnvelope({
    nonce: parts.nonce,
    service: 'gms-pc',
    evidence: new Map<string, unknown>([
      ['packageName', parts.packageName],
      ['integrityToken', parts.integrityToken],
    ]),
  });
}
