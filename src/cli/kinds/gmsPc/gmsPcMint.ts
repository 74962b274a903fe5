import { randomBytes } from 'node:crypto';
import { Command } from 'commander';
import { mintPcPayload } from '../../../core/gmsPc/pcMint.js';
import { encodeGmsPcToken } from '../../../core/gmsPc/pcToken.js';
import { encodeBase64 } from '../../../core/base64.js';
import { parseDuration } from '../../../core/duration.js';
import { usageError } from '../../errors.js';
import { isoInstant } from '../../isoInstant.js';
import { finalNonceOf, type NonceFlags } from '../../tokenOutput.js';
import { ANDROID_PACKAGE } from '../androidPackage.js';

interface GmsPcMintOptions extends NonceFlags {
  package: string;
  verdict: string[];
  licensing?: string;
  testing?: boolean;
  requestedAt?: string;
  age?: string;
  integrityToken?: string;
  json?: boolean;
}

/**
 * `attest dev mint gms-pc`: only Google can decode a real PC integrity token, so this prints the
 * token and the verdict (a PcTokenPayloadExternal) that a stand-in for Google's
 * decodePcIntegrityToken (ATTEST_GOOGLE_PLAY_INTEGRITY_URL) must answer for its integrity token.
 */
export function gmsPcMintCommand(): Command {
  return new Command('gms-pc')
    .description(
      'mint a gms-pc token and the PC verdict a stand-in for Google must answer when decoding it',
    )
    .requiredOption('--package <name>', 'an allowlisted package with a service account')
    .option(
      '--verdict <label...>',
      'deviceRecognitionVerdict labels (default MEETS_PC_INTEGRITY; none: give --verdict "")',
    )
    .option('--licensing <verdict>', 'accountDetails.appLicensingVerdict', 'LICENSED')
    .option('--testing', 'testingDetails.isTestingResponse true')
    .option('--requested-at <iso-time>', 'requestDetails.requestTime (default now)')
    .option('--age <duration>', 'or: requested this long ago, e.g. 30s, 5m')
    .option('--integrity-token <text>', 'the opaque integrity token to wrap (default random)')
    .option('--nonce <b64>', 'the final nonce (sessionless expectedNonce)')
    .option('--server-nonce <b64>', 'the serverNonce from init (session approach)')
    .option('--device-nonce <b64>', 'with --server-nonce: the deviceNonce you will send to verify')
    .option('--json', 'print {"token","integrityToken","tokenPayloadExternal"}')
    .addHelpText(
      'after',
      `
A Play Integrity for PC token cannot be made without Google: this prints the token and, on
stderr (or in --json), the tokenPayloadExternal a stand-in Google's decodePcIntegrityToken must
answer for it (test keys, staging).

Examples:
  $ attest dev mint gms-pc --package com.example.game --nonce "$(head -c 32 /dev/urandom | base64)"
  $ attest dev mint gms-pc --package com.example.game --server-nonce SERVER_NONCE --json`,
    )
    .action((opts: GmsPcMintOptions) => {
      if (!ANDROID_PACKAGE.test(opts.package))
        throw usageError(`"${opts.package}" is not a package name such as com.example.game`);
      const nonce = finalNonceOf(opts);
      if (opts.requestedAt !== undefined && opts.age !== undefined)
        throw usageError('give one of --requested-at and --age');
      let requestTime = new Date();
      if (opts.requestedAt !== undefined)
        requestTime = isoInstant(opts.requestedAt, '--requested-at', '2026-01-23T12:13:33Z');
      if (opts.age !== undefined) {
        const seconds = parseDuration(opts.age);
        if (seconds === null)
          throw usageError(`--age takes a duration such as 30s or 5m, got "${opts.age}"`);
        requestTime = new Date(Date.now() - seconds * 1000);
      }
      const integrityToken =
        opts.integrityToken ?? `dev-pc-${randomBytes(24).toString('base64url')}`;
      const verdicts = (opts.verdict ?? ['MEETS_PC_INTEGRITY']).filter((v) => v !== '');
      const tokenPayloadExternal = mintPcPayload({
        packageName: opts.package,
        nonce,
        requestTime,
        verdicts,
        appLicensingVerdict: opts.licensing ?? 'LICENSED',
        ...(opts.testing ? { isTestingResponse: true } : {}),
      });
      const token = encodeBase64(
        encodeGmsPcToken({ nonce, packageName: opts.package, integrityToken }),
      );
      process.stdout.write(
        opts.json
          ? `${JSON.stringify({ token, integrityToken, tokenPayloadExternal })}\n`
          : `${token}\n`,
      );
      if (!opts.json)
        process.stderr.write(
          `decodePcIntegrityToken must answer for ${integrityToken}:\n${JSON.stringify({ tokenPayloadExternal })}\n`,
        );
    });
}
