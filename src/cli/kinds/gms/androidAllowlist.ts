import { Command, Option } from 'commander';
import { keyPairId } from '../../../admin/keyPairId.js';
import type { ResultOf } from '../../../admin/operations.js';
import { parseCertificateDigest } from '../../../core/gms/certificateDigest.js';
import { parsePlayKeys } from '../../../core/gms/keyMaterial.js';
import { ANDROID_DEVICE_LIMIT_FIELD } from '../../../core/androidKey/androidKeyPolicyFields.js';
import { GMS_VERDICT_FIELDS } from '../../../core/gms/gmsPolicyFields.js';
import {
  describePolicy,
  formatDeviceLimit,
  OBSERVED_RULES_FIELD,
} from '../../../core/policyFields.js';
import { DEFAULT_ANDROID_POLICY } from '../../../core/gms/defaultAndroidPolicy.js';
import {
  MIN_VERDICT_LEVEL_NAMES,
  MIN_VERDICT_LEVELS,
  minVerdictLevelOf,
  type MinVerdictLevel,
} from '../../../core/gms/deviceVerdict.js';
import type { GoogleServiceAccount } from '../../../core/ports.js';
import type { AndroidPolicyInput } from '../../../db/androidPackageRows.js';
import { auditorFor, withAdmin } from '../../context.js';
import { usageError } from '../../errors.js';
import { CLI_INPUT_MAX_BYTES, readCliFileSync } from '../../inputFiles.js';
import { printJson } from '../../output.js';
import type { AllowlistKind } from '../allowlistKind.js';
import {
  addKeyAttestationOptions,
  keyAttestationPolicy,
  keyAttestationSummary,
  type KeyAttestationFlags,
} from '../androidKey/keyAttestationOptions.js';
import { ANDROID_PACKAGE } from '../androidPackage.js';
import {
  addObserveOptions,
  observeChangeFromOptions,
  observeMode,
  rolloutBefore,
  rolloutNote,
  type ObserveFlags,
} from '../observeOptions.js';
import { addPolicyOptions, policyOptions } from '../policyOptions.js';
import { readServiceAccountFile } from './serviceAccountFile.js';

/**
 * Android packages on the allowlist: one entry holds a package's Play Integrity keys and policy
 * (gms) and its key attestation policy (android-key).
 */
export const androidAllowlist: AllowlistKind = {
  entry: 'android',
  noun: 'an Android package',
  addCommand: androidAllowCommand,
  pick(list, id) {
    const android = list.android.filter((p) => p.packageName === id);
    return android.length ? { apple: [], android } : null;
  },
  listRows: ({ android }: ResultOf<'allowlist.list'>) =>
    android.map((p) => [
      'android',
      p.packageName,
      `min ${minVerdictLevelOf(p.minVerdict)}, max-age ${p.maxAgeSeconds}s` +
        `${p.allowUnrecognized ? ', unrecognized ok' : ''}, ${p.certificateDigests.length ? `${p.certificateDigests.length} cert digest(s)` : 'any cert'}` +
        describePolicy(GMS_VERDICT_FIELDS, p)
          .map((words) => `, ${words}`)
          .join('') +
        `${p.serviceAccount ? `, standard via ${p.serviceAccount}` : ''}` +
        keyAttestationSummary(p) +
        describePolicy([OBSERVED_RULES_FIELD], p)
          .map((words) => `, ${words}`)
          .join('') +
        describePolicy([ANDROID_DEVICE_LIMIT_FIELD], p)
          .map((words) => `; ${words}`)
          .join(''),
      [...p.keyPairs, ...p.testOnlyKeyPairs.map((id) => `${id} (test-only)`)].join(' ') ||
        (p.serviceAccount
          ? '(none: standard requests only)'
          : p.keyAttestation
            ? '(none: android-key only)'
            : '(none: no token can pass)'),
    ]),
  checkRemove() {},
  removePrompt(id, keyId, found) {
    const pairs = found?.pairs ?? [];
    if (!found || (keyId && !pairs.includes(keyId))) return null;
    return !keyId
      ? [
          `This removes android ${id} with its policy and ${pairs.length} key pair(s): its tokens are rejected within 5 seconds.`,
        ]
      : pairs.length === 1
        ? [
            `This retires key pair ${keyId}, the last one of ${id}: after it no token of ${id} can pass until a new pair is added.`,
          ]
        : [
            `This retires key pair ${keyId} of ${id}; ${pairs.filter((p) => p !== keyId).join(', ')} stay(s). Tokens still encrypted with it are rejected within 5 seconds.`,
          ];
  },
  examples: {
    add: '$ attest allowlist add android com.example.bank --decryption-key-file dec.txt --verification-key-file ver.txt',
    addHelp:
      '$ attest allowlist add android com.example.bank --decryption-key-file dec.txt --verification-key-file ver.txt',
    remove: [
      '$ attest allowlist remove android com.example.bank --key-id 1f2e3d4c5b6a7980',
      '$ attest allowlist remove android com.example.bank --yes --json   # from a script',
    ],
  },
};

/** `attest allowlist add android`: allow a package with its Play keys and policy, or change them. */
function androidAllowCommand(): Command {
  const command = new Command('android')
    .description(
      'allow an Android package with its Play Integrity keys; on an existing package, adds a key pair (rotation)',
    )
    .argument('<package>', 'application ID, e.g. com.example.app')
    .option('--decryption-key <b64>', 'AES-256 decryption key from the Play Console (base64)')
    .option('--decryption-key-file <path>', 'read the decryption key from a file instead')
    .option(
      '--verification-key <b64>',
      'EC P-256 verification key from the Play Console (base64 DER SPKI)',
    )
    .option('--verification-key-file <path>', 'read the verification key from a file instead')
    .option(
      '--cert-digest <digest>',
      'SHA-256 of an allowed signing certificate (hex or base64); repeatable',
      collect,
      [],
    )
    .addOption(
      new Option(
        '--min-verdict <verdict>',
        `minimum device integrity (default ${minVerdictLevelOf(DEFAULT_ANDROID_POLICY.minVerdict)})`,
      ).choices(MIN_VERDICT_LEVEL_NAMES),
    )
    .option('--allow-unrecognized', 'also accept UNRECOGNIZED_VERSION app verdicts')
    .option('--no-allow-unrecognized', 'accept PLAY_RECOGNIZED app verdicts only again')
    .option(
      '--max-age <seconds>',
      `oldest accepted token age in seconds (default ${DEFAULT_ANDROID_POLICY.maxAgeSeconds})`,
    )
    .option(
      '--without-keys',
      'no Play Console keys: classic Play Integrity tokens pass only when minted by "attest dev mint gms" (test API keys); standard requests (--service-account-file) and --key-attestation need none',
    )
    .option(
      '--service-account-file <path>',
      'Google service-account key (JSON) that decodes standard-request tokens',
    )
    .option(
      '--remove-service-account',
      'forget the stored service account (standard requests are then refused)',
    );
  return addObserveOptions(
    addPolicyOptions(addKeyAttestationOptions(addPolicyOptions(command, GMS_VERDICT_FIELDS)), [
      ANDROID_DEVICE_LIMIT_FIELD,
    ]),
    'android',
  )
    .option('--json', 'print the result as JSON')
    .addHelpText(
      'after',
      `
Examples:
  $ attest allowlist add android com.example.bank \\
      --decryption-key-file dec.txt --verification-key-file ver.txt \\
      --cert-digest 6A:6A:14:74:... --min-verdict strong --max-age 300
  # standard requests, decoded by Google with the package's service account
  $ attest allowlist add android com.example.bank --service-account-file sa.json
  # policy on the newer verdicts (classic and standard alike)
  $ attest allowlist add android com.example.bank --require-licensed --require-play-protect \\
      --deny-app-access-risk capturing,controlling --max-device-activity LEVEL_2
  # reject devices your backend marked with device recall bit first or second
  $ attest allowlist add android com.example.bank --deny-recall-bits first,second
  # Play account activity at least TYPICAL_BASIC, observed first
  $ attest allowlist add android com.example.bank --min-account-activity typical_basic \\
      --observe gms_account_activity
  # hardware key attestation (android-key), alone or beside Play Integrity
  $ attest allowlist add android com.example.bank --without-keys --key-attestation \\
      --min-security-level strongbox --max-patch-age 12m --cert-digest 6A:6A:14:74:...
  # roll a rule out: record its failures first, enforce it once the logs show few
  $ attest allowlist add android com.example.bank --observe gms_play_protect,android_patch_level_stale
  $ attest allowlist add android com.example.bank --enforce gms_play_protect
  # at most 1000 verifies a day per android-key device
  $ attest allowlist add android com.example.bank --max-verifies-per-device 1000/1d
  # rotation: add the new pair, then retire the old one
  $ attest allowlist add android com.example.bank --decryption-key NEW... --verification-key NEW...
  $ attest allowlist remove android com.example.bank --key-id 1f2e3d4c5b6a7980`,
    )
    .action(async (pkg: string, opts: AndroidOptions, command: Command) => {
      if (!ANDROID_PACKAGE.test(pkg))
        throw usageError(`"${pkg}" is not an Android package name such as com.example.app`);
      const observeChange = observeChangeFromOptions('android', opts);
      const verdicts: AndroidPolicyInput = {
        ...policyOptions<AndroidPolicyInput>(GMS_VERDICT_FIELDS, opts),
        ...keyAttestationPolicy(opts),
        ...(observeChange ? { observeChange } : {}),
        ...policyOptions<AndroidPolicyInput>([ANDROID_DEVICE_LIMIT_FIELD], opts),
      };
      const limit = verdicts.maxVerifiesPerDevice;
      const serviceAccount = await serviceAccountOption(opts);
      const anyKey = [
        opts.decryptionKey,
        opts.decryptionKeyFile,
        opts.verificationKey,
        opts.verificationKeyFile,
      ].some((v) => v !== undefined);
      if (opts.withoutKeys && anyKey) throw usageError('--without-keys takes no key options');
      // without keys: a service account alone (standard requests only), or a policy change of an existing package
      const policyOnly =
        !anyKey &&
        (serviceAccount !== undefined ||
          Object.keys(verdicts).length > 0 ||
          opts.certDigest.length > 0 ||
          opts.minVerdict !== undefined ||
          opts.allowUnrecognized !== undefined ||
          opts.maxAge !== undefined);
      let pair: { id: string; decryptionKey: Uint8Array; verificationKey: Uint8Array } | null =
        null;
      if (!opts.withoutKeys && !policyOnly) {
        const decryption = keyText(opts.decryptionKey, opts.decryptionKeyFile, '--decryption-key');
        const verification = keyText(
          opts.verificationKey,
          opts.verificationKeyFile,
          '--verification-key',
        );
        try {
          const { decryptionKey, verificationKey } = parsePlayKeys(decryption, verification);
          pair = { id: keyPairId(decryptionKey, verificationKey), decryptionKey, verificationKey };
        } catch (err) {
          throw usageError(
            `${(err as Error).message}; copy the keys from the Play Console (App integrity > Response encryption), or give --without-keys`,
          );
        }
      }
      const digests = opts.certDigest.map((d) => {
        const bytes = parseCertificateDigest(d);
        if (!bytes)
          throw usageError(`--cert-digest "${d}" is not a SHA-256 digest in hex or base64`);
        return bytes;
      });
      let maxAgeSeconds: number | undefined;
      if (opts.maxAge !== undefined) {
        maxAgeSeconds = Number(opts.maxAge);
        if (!Number.isInteger(maxAgeSeconds) || maxAgeSeconds < 1 || maxAgeSeconds > 86_400)
          throw usageError('--max-age must be 1 to 86400 seconds');
      }
      const mode = observeMode(opts);
      const auditor = auditorFor(command);
      await withAdmin(
        async (admin) => {
          const before = await rolloutBefore(admin, pkg, observeChange, mode);
          const result = await admin.run('allowlist.addAndroid', {
            packageName: pkg,
            pair: pair && {
              decryptionKey: pair.decryptionKey,
              verificationKey: pair.verificationKey,
            },
            withoutKeys: opts.withoutKeys === true,
            policy: {
              ...(digests.length ? { certificateDigests: digests } : {}),
              ...(opts.minVerdict ? { minVerdict: MIN_VERDICT_LEVELS[opts.minVerdict] } : {}),
              ...(opts.allowUnrecognized !== undefined
                ? { allowUnrecognized: opts.allowUnrecognized }
                : {}),
              ...(maxAgeSeconds !== undefined ? { maxAgeSeconds } : {}),
              ...verdicts,
              ...(serviceAccount !== undefined ? { serviceAccount } : {}),
            },
          });
          const account =
            serviceAccount === undefined
              ? {}
              : { serviceAccount: serviceAccount?.clientEmail ?? null };
          if (opts.json)
            printJson({
              kind: 'android',
              packageName: pkg,
              keyId: pair?.id ?? null,
              ...account,
              ...(limit !== undefined ? { maxVerifiesPerDevice: limit } : {}),
              ...result,
            });
          else {
            const parts = [`${result.package} android ${pkg}`];
            if (pair)
              parts.push(
                `key pair ${pair.id} ${result.pair === 'added' ? 'added' : 'was already there'}`,
              );
            else if (opts.withoutKeys) parts.push('without Play keys');
            if (verdicts.keyAttestation === true) parts.push('key attestation allowed');
            if (verdicts.keyAttestation === false) parts.push('key attestation off');
            if (serviceAccount) parts.push(`service account ${serviceAccount.clientEmail}`);
            if (serviceAccount === null) parts.push('service account removed');
            if (observeChange) parts.push(`observe ${result.observe.join(', ') || 'nothing'}`);
            if (limit) parts.push(`at most ${formatDeviceLimit(limit)} verifies per device`);
            if (limit === null) parts.push('verifies per device not counted');
            process.stdout.write(
              `${parts.join('; ')}\n${rolloutNote(pkg, observeChange, before, mode)}`,
            );
          }
        },
        { auditor },
      );
    });
}

interface AndroidOptions extends KeyAttestationFlags, ObserveFlags {
  decryptionKey?: string;
  decryptionKeyFile?: string;
  verificationKey?: string;
  verificationKeyFile?: string;
  certDigest: string[];
  minVerdict?: MinVerdictLevel;
  allowUnrecognized?: boolean;
  maxAge?: string;
  withoutKeys?: boolean;
  serviceAccountFile?: string;
  removeServiceAccount?: boolean;
  json?: boolean;
}

/** `--service-account-file` read and checked, `null` for `--remove-service-account`, else undefined. */
async function serviceAccountOption(
  opts: AndroidOptions,
): Promise<GoogleServiceAccount | null | undefined> {
  if (opts.removeServiceAccount && opts.serviceAccountFile !== undefined)
    throw usageError('give --service-account-file or --remove-service-account, not both');
  if (opts.removeServiceAccount) return null;
  if (opts.serviceAccountFile === undefined) return undefined;
  return readServiceAccountFile(opts.serviceAccountFile);
}

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

function keyText(inline: string | undefined, file: string | undefined, flag: string): string {
  if (inline !== undefined && file !== undefined)
    throw usageError(`give ${flag} or ${flag}-file, not both`);
  if (file !== undefined)
    return readCliFileSync(file, { maxBytes: CLI_INPUT_MAX_BYTES, what: `${flag}-file` })
      .toString('utf8')
      .trim();
  if (inline === undefined) throw usageError(`${flag} (or ${flag}-file) is required`);
  return inline.trim();
}
