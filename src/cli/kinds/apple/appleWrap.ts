import { Command } from 'commander';
import { decodeBase64 } from '../../../core/base64.js';
import { encodeAppleToken } from '../../../core/apple/appleToken.js';
import { usageError } from '../../errors.js';
import { finalNonceOf, printToken, type NonceFlags } from '../../tokenOutput.js';
import { readWrapInput } from '../wrapInput.js';

const KEY_ID_BYTES = 32;

/** `attest token wrap apple`: App Attest objects an app captured, as a format-1 token. */
export function appleWrapCommand(): Command {
  return new Command('apple')
    .description('wrap an App Attest attestation and/or assertion object')
    .requiredOption(
      '--key-id <b64>',
      'the App Attest key identifier (32 bytes, base64 as attestKey returns it)',
    )
    .option(
      '--attestation <file>',
      'the attestation object from attestKey (raw CBOR or base64 text)',
    )
    .option(
      '--assertion <file>',
      'the assertion object from generateAssertion (raw CBOR or base64 text)',
    )
    .option('--nonce <b64>', 'the final nonce the app hashed into clientDataHash (sessionless)')
    .option('--server-nonce <b64>', 'the serverNonce from init (session approach)')
    .option('--device-nonce <b64>', 'with --server-nonce: the deviceNonce')
    .option('--json', 'print {"token","keyId"}')
    .addHelpText(
      'after',
      `
The app must have used clientDataHash = SHA-256(final nonce).

Examples:
  $ attest token wrap apple --key-id "$KEY_ID" --attestation attestation.cbor --nonce "$NONCE"
  $ attest token wrap apple --key-id "$KEY_ID" --assertion assertion.b64 --server-nonce "$SERVER_NONCE"`,
    )
    .action(
      async (
        opts: NonceFlags & {
          keyId: string;
          attestation?: string;
          assertion?: string;
          json?: boolean;
        },
      ) => {
        const keyId = decodeBase64(opts.keyId);
        if (!keyId || keyId.length !== KEY_ID_BYTES)
          throw usageError(
            `--key-id must be base64 of ${KEY_ID_BYTES} bytes (the key identifier attestKey returned)`,
          );
        if (opts.attestation === undefined && opts.assertion === undefined)
          throw usageError('give --attestation <file>, --assertion <file>, or both');
        const nonce = finalNonceOf(opts);
        const attestation =
          opts.attestation === undefined
            ? undefined
            : await readObject(opts.attestation, '--attestation');
        const assertion =
          opts.assertion === undefined
            ? undefined
            : await readObject(opts.assertion, '--assertion');
        printToken(
          encodeAppleToken({
            nonce,
            keyId,
            ...(attestation ? { attestation } : {}),
            ...(assertion ? { assertion } : {}),
          }),
          opts.json,
          { keyId },
        );
      },
    );
}

/** An App Attest object: raw CBOR (a map) or its base64 text, as apps often log it. */
async function readObject(path: string, flag: string): Promise<Uint8Array> {
  const raw = await readWrapInput(path, flag);
  if (raw.length === 0) throw usageError(`${flag}: ${path} is empty`);
  // a CBOR map starts with major type 5; base64 text never does (it is ASCII)
  if (raw[0]! >> 5 === 5) return new Uint8Array(raw);
  const bytes = decodeBase64(raw.toString('latin1').replace(/\s+/g, ''));
  if (!bytes || bytes.length === 0 || bytes[0]! >> 5 !== 5)
    throw usageError(`${flag}: ${path} is neither a CBOR object nor its base64 text`);
  return bytes;
}
