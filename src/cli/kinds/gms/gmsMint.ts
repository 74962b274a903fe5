import { Command, Option } from 'commander';
import type { MintedVerdicts, Recognition } from '../../../core/dev/playIntegrityMint.js';
import { parseVerdictValues, VERDICT_VALUE } from '../../../core/gms/accountLocationPolicy.js';
import { parseCertificateDigest } from '../../../core/gms/certificateDigest.js';
import {
  MIN_VERDICT_LEVEL_NAMES,
  MIN_VERDICT_LEVELS,
  MIN_VERDICTS,
  type MinVerdictLevel,
} from '../../../core/gms/deviceVerdict.js';
import { parseRecallBitList } from '../../../core/gms/verdictPolicy.js';
import type { RecallBit } from '../../../core/gms/gmsTokenDetails.js';
import { auditorFor, withAdmin } from '../../context.js';
import { parseDuration } from '../../../core/duration.js';
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
    .option(
      '--licensing <verdict>',
      'accountDetails.appLicensingVerdict: LICENSED (default), UNLICENSED, UNEVALUATED',
    )
    .option(
      '--play-protect <verdict>',
      'environmentDetails.playProtectVerdict: NO_ISSUES, NO_DATA, POSSIBLE_RISK, MEDIUM_RISK, HIGH_RISK, UNEVALUATED',
    )
    .option(
      '--apps-detected <values>',
      'environmentDetails.appAccessRiskVerdict.appsDetected, comma-separated (KNOWN_CAPTURING, UNKNOWN_CONTROLLING...), or none',
    )
    .option(
      '--device-activity <level>',
      'deviceIntegrity.recentDeviceActivity.deviceActivityLevel: LEVEL_1 to LEVEL_4 (or 1 to 4), UNEVALUATED',
    )
    .option(
      '--account-activity <level>',
      'accountDetails.accountActivity.activityLevel: UNEVALUATED, UNUSUAL, UNKNOWN, TYPICAL_BASIC, TYPICAL_STRONG',
    )
    .option(
      '--location-spoofing <values>',
      'environmentDetails.locationSpoofingRiskVerdict, comma-separated value names, or none',
    )
    .option(
      '--legacy-verdict <level>',
      "deviceIntegrity.legacyDeviceRecognitionVerdict: basic, device, strong, none, or Google's labels comma-separated",
    )
    .option('--json', 'print {"token"}')
    .addHelpText(
      'after',
      `
Each verdict flag takes Google's values, or any other name in capitals (a value Google may add
later), so every package rule can be tried without a device.

Examples:
  $ attest allowlist add android com.example.app --without-keys
  $ attest dev mint gms --package com.example.app --nonce "$NONCE"
  $ attest dev mint gms --package com.example.app --server-nonce "$SERVER_NONCE" --verdict basic --age 2m
  $ attest dev mint gms --package com.example.app --nonce "$NONCE" --account-activity UNUSUAL --apps-detected UNKNOWN_CAPTURING`,
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
      const verdicts = mintedVerdicts(opts);
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
            ...(Object.keys(verdicts).length > 0 ? { verdicts } : {}),
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
  licensing?: string;
  playProtect?: string;
  appsDetected?: string;
  deviceActivity?: string;
  accountActivity?: string;
  locationSpoofing?: string;
  legacyVerdict?: string;
  json?: boolean;
}

/** The newer verdicts the flags give, each checked as a value name Google could send. */
function mintedVerdicts(opts: GmsMintOptions): MintedVerdicts {
  const one = (flag: string, text: string | undefined, shorthand?: (t: string) => string) => {
    if (text === undefined) return undefined;
    const value = (shorthand?.(text.trim()) ?? text.trim()).toUpperCase().replace(/-/g, '_');
    if (!VERDICT_VALUE.test(value))
      throw usageError(`${flag}: "${text}" is not a verdict value such as TYPICAL_BASIC`);
    return value;
  };
  const list = (flag: string, text: string | undefined) => {
    if (text === undefined) return undefined;
    if (text.trim().toLowerCase() === 'none') return [];
    const parsed = parseVerdictValues(text, flag.slice(2));
    if (!parsed.ok) throw usageError(`${flag}: ${parsed.problem}`);
    return parsed.values;
  };
  const level = opts.legacyVerdict?.trim().toLowerCase();
  const out: MintedVerdicts = {
    appLicensingVerdict: one('--licensing', opts.licensing),
    playProtectVerdict: one('--play-protect', opts.playProtect),
    appsDetected: list('--apps-detected', opts.appsDetected),
    deviceActivityLevel: one('--device-activity', opts.deviceActivity, (t) =>
      /^\d$/.test(t) ? `LEVEL_${t}` : t,
    ),
    accountActivityLevel: one('--account-activity', opts.accountActivity),
    locationSpoofingRiskVerdict: list('--location-spoofing', opts.locationSpoofing),
    legacyDeviceRecognitionVerdict:
      level !== undefined && Object.hasOwn(MIN_VERDICT_LEVELS, level)
        ? // as Play lists them: a stronger level carries the weaker ones
          MIN_VERDICTS.slice(
            0,
            MIN_VERDICTS.indexOf(MIN_VERDICT_LEVELS[level as MinVerdictLevel]) + 1,
          )
        : list('--legacy-verdict', opts.legacyVerdict),
  };
  return Object.fromEntries(
    Object.entries(out).filter(([, v]) => v !== undefined),
  ) as MintedVerdicts;
}
