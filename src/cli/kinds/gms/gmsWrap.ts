import { Command } from 'commander';
import { encodeGmsToken } from '../../../core/gms/gmsToken.js';
import { INTEGRITY_TOKEN_MAX_BYTES } from '../../../core/gms/googleVerifier.js';
import { usageError } from '../../errors.js';
import { finalNonceOf, printToken, type NonceFlags } from '../../tokenOutput.js';
import { ANDROID_PACKAGE } from '../androidPackage.js';
import { readWrapInput } from '../wrapInput.js';

/** `attest token wrap gms`: a Play Integrity integrity token an app received, as a format-1 token. */
export function gmsWrapCommand(): Command {
  return new Command('gms')
    .description('wrap a Play Integrity integrity token (the compact JWE the app received)')
    .requiredOption('--package <name>', 'the Android package that requested it')
    .requiredOption('--integrity-token <file>', 'file holding the integrity token text')
    .option('--nonce <b64>', 'the final nonce the app requested the token with (sessionless)')
    .option('--server-nonce <b64>', 'the serverNonce from init (session approach)')
    .option('--device-nonce <b64>', 'with --server-nonce: the deviceNonce')
    .option('--json', 'print {"token"}')
    .addHelpText(
      'after',
      `
The app must have requested the token with nonce = base64url(final nonce), no padding.

Example:
  $ attest token wrap gms --package com.example.app --integrity-token play.jwe --nonce "$NONCE"`,
    )
    .action(
      async (opts: NonceFlags & { package: string; integrityToken: string; json?: boolean }) => {
        if (!ANDROID_PACKAGE.test(opts.package))
          throw usageError(
            `"${opts.package}" is not an Android package name such as com.example.app`,
          );
        const nonce = finalNonceOf(opts);
        const text = (await readWrapInput(opts.integrityToken, '--integrity-token'))
          .toString('utf8')
          .trim();
        if (!/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]*){4}$/.test(text)) {
          throw usageError(
            `${opts.integrityToken} does not hold a compact JWE (five base64url parts joined by dots), which is what the Play Integrity API returns`,
          );
        }
        if (Buffer.byteLength(text) > INTEGRITY_TOKEN_MAX_BYTES)
          throw usageError(`the integrity token is over ${INTEGRITY_TOKEN_MAX_BYTES} bytes`);
        printToken(
          encodeGmsToken({ nonce, packageName: opts.package, integrityToken: text }),
          opts.json,
        );
      },
    );
}
