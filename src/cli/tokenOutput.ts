import { decodeBase64, encodeBase64 } from '../core/base64.js';
import { DEVICE_NONCE_BYTES, finalNonce } from '../core/verify.js';
import { TOKEN_NONCE_MAX, TOKEN_NONCE_MIN } from '../core/envelope.js';
import { usageError } from './errors.js';
import { printJson } from './output.js';

/** The nonce flags shared by `dev mint` and `token wrap`. */
export interface NonceFlags {
  nonce?: string;
  serverNonce?: string;
  deviceNonce?: string;
}

/** The bytes of a base64 flag, or a usage error naming the flag. */
export function bytesFlag(value: string, flag: string): Uint8Array {
  const b = decodeBase64(value);
  if (!b) throw usageError(`${flag} must be base64 (standard or URL-safe)`);
  return b;
}

/**
 * The final nonce (docs/token-format.md section 2): `--nonce` (sessionless expectedNonce) or
 * `--server-nonce` followed by the optional `--device-nonce`. One form is required.
 */
export function finalNonceOf(flags: NonceFlags): Uint8Array {
  if (
    flags.nonce !== undefined &&
    (flags.serverNonce !== undefined || flags.deviceNonce !== undefined)
  ) {
    throw usageError(
      'give --nonce (sessionless) or --server-nonce [--device-nonce] (session), not both',
    );
  }
  if (flags.deviceNonce !== undefined && flags.serverNonce === undefined)
    throw usageError('--device-nonce needs --server-nonce');
  if (flags.nonce === undefined && flags.serverNonce === undefined) {
    throw usageError(
      'give the nonce: --nonce <b64> (sessionless expectedNonce) or --server-nonce <b64> from init [--device-nonce <b64>]',
    );
  }
  let nonce: Uint8Array;
  if (flags.nonce !== undefined) {
    nonce = bytesFlag(flags.nonce, '--nonce');
  } else {
    const server = bytesFlag(flags.serverNonce!, '--server-nonce');
    const device =
      flags.deviceNonce === undefined ? undefined : bytesFlag(flags.deviceNonce, '--device-nonce');
    if (
      device &&
      (device.length < DEVICE_NONCE_BYTES.min || device.length > DEVICE_NONCE_BYTES.max)
    ) {
      throw usageError(
        `--device-nonce must be ${DEVICE_NONCE_BYTES.min} to ${DEVICE_NONCE_BYTES.max} bytes`,
      );
    }
    nonce = finalNonce(server, device);
  }
  if (nonce.length < TOKEN_NONCE_MIN || nonce.length > TOKEN_NONCE_MAX) {
    throw usageError(
      `the final nonce must be ${TOKEN_NONCE_MIN} to ${TOKEN_NONCE_MAX} bytes, got ${nonce.length}`,
    );
  }
  return nonce;
}

/**
 * Prints a token: its base64 on stdout, or with `--json` exactly `{"token","keyId"?,"counter"?}`
 * (a stable shape: clients and scripts read it).
 */
export function printToken(
  token: Uint8Array,
  json: boolean | undefined,
  extra: { keyId?: Uint8Array; counter?: number } = {},
): void {
  if (!json) {
    process.stdout.write(`${encodeBase64(token)}\n`);
    return;
  }
  printJson({
    token: encodeBase64(token),
    ...(extra.keyId ? { keyId: encodeBase64(extra.keyId) } : {}),
    ...(extra.counter !== undefined ? { counter: extra.counter } : {}),
  });
}
