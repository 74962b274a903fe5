import { Command } from 'commander';
import { INTEGRITY_TOKEN_MAX_BYTES } from '../../../core/gms/googleVerifier.js';
import { encodeGmsPcToken } from '../../../core/gmsPc/pcToken.js';
import { usageError } from '../../errors.js';
import { finalNonceOf, printToken, type NonceFlags } from '../../tokenOutput.js';
import { ANDROID_PACKAGE } from '../androidPackage.js';
import { readWrapInput } from '../wrapInput.js';

/** `attest token wrap gms-pc`: a Play Integrity for PC token a game received, as a format-1 token. */
export function gmsPcWrapCommand(): Command {
  return new Command('gms-pc')
    .description('wrap a Play Integrity for PC integrity token (Google Play Games on PC)')
    .requiredOption('--package <name>', 'the package that requested it')
    .requiredOption('--integrity-token <file>', 'file holding the integrity token text')
    .option('--nonce <b64>', 'the final nonce (sessionless)')
    .option('--server-nonce <b64>', 'the serverNonce from init (session approach)')
    .option('--device-nonce <b64>', 'with --server-nonce: the deviceNonce')
    .option('--json', 'print {"token"}')
    .addHelpText(
      'after',
      `
The game must have requested the token with requestHash = base64url(SHA-256(final nonce)).

Example:
  $ attest token wrap gms-pc --package com.example.game --integrity-token pc.txt --nonce "$NONCE"`,
    )
    .action(
      async (opts: NonceFlags & { package: string; integrityToken: string; json?: boolean }) => {
        if (!ANDROID_PACKAGE.test(opts.package))
          throw usageError(`"${opts.package}" is not a package name such as com.example.game`);
        const nonce = finalNonceOf(opts);
        const text = (await readWrapInput(opts.integrityToken, '--integrity-token'))
          .toString('utf8')
          .trim();
        if (text.length === 0) throw usageError(`${opts.integrityToken} is empty`);
        if (Buffer.byteLength(text) > INTEGRITY_TOKEN_MAX_BYTES)
          throw usageError(`the integrity token is over ${INTEGRITY_TOKEN_MAX_BYTES} bytes`);
        printToken(
          encodeGmsPcToken({ nonce, packageName: opts.package, integrityToken: text }),
          opts.json,
        );
      },
    );
}
