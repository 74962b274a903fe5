import { Command, Option } from 'commander';
import type { Recognition } from '../../../core/dev/playIntegrityMint.js';
import { parseCertificateDigest } from '../../../core/google/certificateDigest.js';
import {
  MIN_VERDICT_LEVEL_NAMES,
  MIN_VERDICT_LEVELS,
  type MinVerdictLevel,
} from '../../../core/google/deviceVerdict.js';
import { parseRecallBitList } from '../../../core/google/verdictPolicy.js';
import type { RecallBit } from '../../../core/types.js';
import { auditorFor, withAdmin } from '../../context.js';
import { parseDuration } from '../../../duration.js';
import { usageError } from '../../errors.js';
import { isoInstant } from '../../isoInstant.js';
import { finalNonceOf, printToken, type NonceFlags } from '../../tokenOutput.js';
import { ANDROID_PACKAGE } from '../androidPackage.js';

/** `attest dev mint gms`: Play Integrity tokens sealed with a test-only key pair, for test API keys. */
export function gmsMintCommand(): Command {
  return new Command('gms')
    .description(
      "mint a Play Integrity token sealed with the package's test-only key pair (made on first use)",
    )
    .requiredOption('--package <name>', 'an allowlisted Android package')
    .addOption(
      new Option('--verdict <level>', "device integrity (default: the package's minimum)").choices(
        MIN_VERDICT_LEVEL_NAMES,
      ),
    )
    .addOption(
      new Option('--recognition <verdict>', 'app recognition verdict')
        .choices(['PLAY_RECOGNIZED', 'UNRECOGNIZED_VERSION', 'UNEVALUATED'])
        .default('PLAY_RECOGNIZED'),
    )
    .option(
      '--cert-digest <digest>',
      "signing certificate SHA-256 (hex or base64; default: the package's first allowed one)",
    )
    .option('--issued-at <iso-time>', 'when Play issued the verdict (default now)')
    .option('--age <duration>', 'or: issued this long ago, e.g. 30s, 5m')
    .option('--nonce <b64>', 'the final nonce (sessionless expectedNonce)')
    .option('--server-nonce <b64>', 'the serverNonce from init (session approach)')
    .option('--device-nonce <b64>', 'with --server-nonce: the deviceNonce you will send to verify')
    .option('--wrong-nonce', 'deny path: the verdict binds another nonce (gms_nonce_mismatch)')
    .option(
      '--wrong-package',
      'deny path: the verdict names another requesting package (gms_package_mismatch)',
    )
    .option('--stale', "deny path: issued just beyond the package's maximum age (gms_token_stale)")
    .option(
      '--recall <bits>',
      'Play device recall bits set on the device: first,second,third (as if your backend had written them)',
    )
    .option('--json', 'print {"token"}')
    .addHelpText(
      'after',
      `
Examples:
  $ attest allowlist add android com.example.app --without-keys
  $ attest dev mint gms --package com.example.app --nonce "$NONCE"
  $ attest dev mint gms --package com.example.app --server-nonce "$SERVER_NONCE" --verdict basic --age 2m`,
    )
    .action(async (opts: GmsMintOptions, command: Command) => {
      const auditor = auditorFor(command);
      const nonce = finalNonceOf(opts);
      if (!ANDROID_PACKAGE.test(opts.package))
        throw usageError(
          `"${opts.package}" is not an Android package name such as com.example.app`,
        );
      const given = [
        opts.issuedAt !== undefined,
        opts.age !== undefined,
        opts.stale === true,
      ].filter(Boolean).length;
      if (given > 1) throw usageError('give one of --issued-at, --age and --stale');
      let digest: Uint8Array | undefined;
      if (opts.certDigest !== undefined) {
        digest = parseCertificateDigest(opts.certDigest) ?? undefined;
        if (!digest)
          throw usageError(
            `--cert-digest "${opts.certDigest}" is not a SHA-256 digest in hex or base64`,
          );
      }
      let recallBits: RecallBit[] | undefined;
      if (opts.recall !== undefined) {
        const parsed = parseRecallBitList(opts.recall);
        if (!parsed.ok) throw usageError(`--recall: ${parsed.problem}`);
        recallBits = parsed.values;
      }
      const now = new Date();
      let issuedAt = now;
      if (opts.issuedAt !== undefined)
        issuedAt = isoInstant(opts.issuedAt, '--issued-at', '2026-01-23T12:13:33Z');
      if (opts.age !== undefined) {
        const seconds = parseDuration(opts.age);
        if (seconds === null)
          throw usageError(`--age takes a duration such as 30s or 5m, got "${opts.age}"`);
        issuedAt = new Date(now.getTime() - seconds * 1000);
      }

      const { token, created } = await withAdmin(
        (admin) =>
          admin.run('dev.mintGms', {
            packageName: opts.package,
            nonce,
            issuedAt,
            stale: opts.stale === true,
            ...(opts.verdict ? { minVerdict: MIN_VERDICT_LEVELS[opts.verdict] } : {}),
            recognition: opts.recognition,
            ...(digest ? { certificateDigest: digest } : {}),
            wrongNonce: opts.wrongNonce === true,
            wrongPackage: opts.wrongPackage === true,
            ...(recallBits ? { recallBits } : {}),
          }),
        { auditor },
      );
      if (created)
        process.stderr.write(
          `added test-only key pair ${created} to ${opts.package} (tried for test API keys only)\n`,
        );
      printToken(token, opts.json);
    });
}

interface GmsMintOptions extends NonceFlags {
  package: string;
  verdict?: MinVerdictLevel;
  recognition: Recognition;
  certDigest?: string;
  issuedAt?: string;
  age?: string;
  wrongNonce?: boolean;
  wrongPackage?: boolean;
  stale?: boolean;
  recall?: string;
  json?: boolean;
}
