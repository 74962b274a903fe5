import { encodeCbor } from '../dev/encodeToken.js';

/** A format-1 `gms-pc` token: `device.service` "gms-pc" and the `gms-pc` map the verifier reads. */
export function encodeGmsPcToken(parts: {
  nonce: Uint8Array;
  packageName: string;
  integrityToken: string;
}): Uint8Array {
  return encodeCbor(
    new Map<string, unknown>([
      ['v', 1],
      ['nonce', Buffer.from(parts.nonce)],
      ['device', new Map<string, string>([['service', 'gms-pc']])],
      [
        'gms-pc',
        new Map<string, unknown>([
          ['packageName', parts.packageName],
          ['integrityToken', parts.integrityToken],
        ]),
      ],
    ]),
  );
}
