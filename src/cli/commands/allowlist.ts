import { Command, Option } from 'commander';
import { parseCertificateDigest } from '../../core/google/certificateDigest.js';
import { parsePlayKeys } from '../../core/google/keyMaterial.js';
import {
  isDeviceActivityLevel,
  parseAppAccessRiskList,
  parsePlayProtectList,
} from '../../core/google/verdictPolicy.js';
import { DEFAULT_ANDROID_POLICY } from '../../core/google/defaultAndroidPolicy.js';
import {
  MIN_VERDICT_LEVEL_NAMES,
  MIN_VERDICT_LEVELS,
  minVerdictLevelOf,
  type MinVerdictLevel,
} from '../../core/google/deviceVerdict.js';
import { isBundleVersion, VALIDATION_CATEGORY_NAMES } from '../../core/apple/appleDistribution.js';
import type {
  AppleAppPolicy,
  AppleEnvPolicy,
  DeviceActivityLevel,
  GoogleServiceAccount,
} from '../../core/types.js';
import { keyPairId } from '../../admin/operations.js';
import type { AndroidPolicyInput, ApplePolicyInput } from '../../db/allowlist.js';
import { parseServiceAccount } from '../../google/serviceAccount.js';
import { confirm, requireConfirmation } from '../confirm.js';
import { auditorFor, withAdmin } from '../context.js';
import { negativeError, usageError } from '../errors.js';
import { CLI_INPUT_MAX_BYTES, readCliFileSync } from '../inputFiles.js';
import {
  addKeyAttestationOptions,
  keyAttestationPolicy,
  type KeyAttestationFlags,
} from '../keyAttestationOptions.js';
import { printJson, printTable } from '../output.js';
import { warnRiskMetricWithoutKey } from './apple.js';

/**
 * `TEAMID.bundle.id`: a 10-character team ID, a dot, a bundle ID. `_` is allowed in the bundle
 * part: Apple's own sample attestations (0352187391.com.apple.example_app_attest) carry one.
 */
export const APPLE_APP_ID = /^[A-Z0-9]{10}\.[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;
/** An Android application ID: at least two dot-separated segments, each starting with a letter. */
export const ANDROID_PACKAGE = /^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)+$/;

export { keyPairId };

export function allowlistCommand(): Command {
  const allowlist = new Command('allowlist')
    .description('apps and packages whose tokens are accepted')
    .addHelpText(
      'after',
      `
Examples:
  $ attest allowlist add apple ABCDE12345.com.example.bank
  $ attest allowlist add android com.example.bank --decryption-key-file dec.txt --verification-key-file ver.txt
  $ attest allowlist list
  $ attest allowlist remove apple ABCDE12345.com.example.bank`,
    );
  const add = allowlist
    .command('add')
    .description('allow an iOS app or an Android package')
    .addHelpText(
      'after',
      `
Examples:
  $ attest allowlist add apple ABCDE12345.com.example.bank --env any
  $ attest allowlist add android com.example.bank --decryption-key-file dec.txt --verification-key-file ver.txt`,
    );

  add
    .command('apple')
    .description('allow an App Attest app ID')
    .argument('<app-id>', 'TEAMID.bundle.id, e.g. ABCDE12345.com.example.app')
    .addOption(
      new Option(
        '--env <env>',
        'App Attest environment(s) accepted (default: production for a new app; an existing app keeps its own)',
      ).choices(['production', 'development', 'any']),
    )
    .option(
      '--require-receipt',
      'reject registrations whose App Attest receipt is missing or invalid (apple_receipt_invalid)',
    )
    .option('--no-require-receipt', 'accept registrations whatever their receipt (the default)')
    .option(
      '--max-risk-metric <n>',
      "reject assertions from keys whose latest risk metric (Apple's count of attestations for the device and app over 30 days) is above n (apple_risk_exceeded)",
    )
    .option('--no-max-risk-metric', 'stop checking the risk metric')
    .option(
      '--validation-category <list>',
      `accepted iOS 27 distributions, comma-separated: ${VALIDATION_CATEGORY_NAMES.join(', ')} (apple_distribution_not_allowed)`,
    )
    .option('--no-validation-category', 'stop checking the validation category')
    .option(
      '--min-bundle-version <v>',
      'lowest accepted iOS 27 bundle version, dotted numbers (apple_distribution_not_allowed)',
    )
    .option('--no-min-bundle-version', 'stop checking the bundle version')
    .option(
      '--allow-missing-validation-category',
      'let tokens without the iOS 27 extensions (iOS 26 and earlier) pass the two rules above',
    )
    .option(
      '--no-allow-missing-validation-category',
      'refuse tokens without the iOS 27 extensions when a rule above is set (the default)',
    )
    .option('--json', 'print the result as JSON')
    .addHelpText(
      'after',
      '\nExamples:\n  $ attest allowlist add apple ABCDE12345.com.example.bank\n  $ attest allowlist add apple ABCDE12345.com.example.bank.beta --env any\n  $ attest allowlist add apple ABCDE12345.com.example.bank --require-receipt --max-risk-metric 5\n  $ attest allowlist add apple ABCDE12345.com.example.bank --validation-category appstore --min-bundle-version 4.2 --allow-missing-validation-category',
    )
    .action(async (appId: string, opts: ApplePolicyOptions, command: Command) => {
      if (!APPLE_APP_ID.test(appId))
        throw usageError(
          `"${appId}" is not an app ID: expected TEAMID.bundle.id with a 10-character uppercase team ID`,
        );
      const policy = applePolicyFromOptions(opts);
      const auditor = auditorFor(command);
      await withAdmin(
        async (admin) => {
          const {
            result,
            env,
            policy: stored,
          } = await admin.run('allowlist.addApple', {
            appId,
            ...(opts.env ? { env: opts.env } : {}),
            policy,
          });
          if (opts.json) printJson({ kind: 'apple', appId, env, result, policy: stored });
          else
            process.stdout.write(
              `${result} apple ${appId} (env ${env}${result === 'updated' && !opts.env ? ', kept' : ''}${describeApplePolicy(stored)})\n`,
            );
          await warnRiskMetricWithoutKey(admin, appId, stored.maxRiskMetric);
        },
        { auditor },
      );
    });

  const addAndroid = add
    .command('android')
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
    )
    .option('--require-licensed', 'require accountDetails.appLicensingVerdict LICENSED')
    .option('--no-require-licensed', 'stop requiring it')
    .option(
      '--require-play-protect [verdicts]',
      'require environmentDetails.playProtectVerdict NO_ISSUES, or one of these (comma-separated)',
    )
    .option('--no-require-play-protect', 'stop checking the Play Protect verdict')
    .option(
      '--deny-app-access-risk <risks>',
      'reject these appsDetected: capturing,controlling,overlays,installed (both known and unknown apps) or exact values such as UNKNOWN_CAPTURING',
    )
    .option('--no-deny-app-access-risk', 'stop checking app-access risk')
    .option(
      '--max-device-activity <level>',
      'highest accepted recentDeviceActivity level, LEVEL_1 to LEVEL_4',
    )
    .option('--no-max-device-activity', 'stop checking recent device activity');
  addKeyAttestationOptions(addAndroid)
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
  # hardware key attestation (android-key), alone or beside Play Integrity
  $ attest allowlist add android com.example.bank --without-keys --key-attestation \\
      --min-security-level strongbox --max-patch-age 12m --cert-digest 6A:6A:14:74:...
  # rotation: add the new pair, then retire the old one
  $ attest allowlist add android com.example.bank --decryption-key NEW... --verification-key NEW...
  $ attest allowlist remove android com.example.bank --key-id 1f2e3d4c5b6a7980`,
    )
    .action(async (pkg: string, opts: AndroidOptions, command: Command) => {
      if (!ANDROID_PACKAGE.test(pkg))
        throw usageError(`"${pkg}" is not an Android package name such as com.example.app`);
      const verdicts = { ...verdictPolicy(opts), ...keyAttestationPolicy(opts) };
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
          opts.allowUnrecognized === true ||
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
      const auditor = auditorFor(command);
      await withAdmin(
        async (admin) => {
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
              ...(opts.allowUnrecognized ? { allowUnrecognized: true } : {}),
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
            process.stdout.write(`${parts.join('; ')}\n`);
          }
        },
        { auditor },
      );
    });

  allowlist
    .command('list')
    .description('list allowed apps and packages (key fingerprints only, never key material)')
    .option('--json', 'print the list as JSON')
    .addHelpText('after', '\nExample:\n  $ attest allowlist list --json')
    .action(async (opts: { json?: boolean }) => {
      await withAdmin(async (admin) => {
        const { apple, android: androidView } = await admin.run('allowlist.list', {});
        if (opts.json) {
          printJson({ apple, android: androidView });
          return;
        }
        printTable(
          ['KIND', 'ID', 'POLICY', 'KEY PAIRS'],
          [
            ...apple.map((a) => ['apple', a.appId, `env ${a.env}${describeApplePolicy(a)}`, '-']),
            ...androidView.map((p) => [
              'android',
              p.packageName,
              `min ${minVerdictLevelOf(p.minVerdict)}, max-age ${p.maxAgeSeconds}s` +
                `${p.allowUnrecognized ? ', unrecognized ok' : ''}, ${p.certificateDigests.length ? `${p.certificateDigests.length} cert digest(s)` : 'any cert'}` +
                `${p.requireLicensed ? ', licensed' : ''}${p.playProtectVerdicts.length ? `, play protect ${p.playProtectVerdicts.join('|')}` : ''}` +
                `${p.denyAppAccessRisk.length ? `, deny ${p.denyAppAccessRisk.join('|')}` : ''}${p.maxDeviceActivity ? `, activity <= ${p.maxDeviceActivity}` : ''}` +
                `${p.serviceAccount ? `, standard via ${p.serviceAccount}` : ''}` +
                keyAttestationSummary(p),
              [...p.keyPairs, ...p.testOnlyKeyPairs.map((id) => `${id} (test-only)`)].join(' ') ||
                (p.serviceAccount
                  ? '(none: standard requests only)'
                  : p.keyAttestation
                    ? '(none: android-key only)'
                    : '(none: no token can pass)'),
            ]),
          ],
        );
      });
    });

  allowlist
    .command('remove')
    .description(
      'remove an app or package; with --key-id, retire one key pair of a package. Asks first on a terminal',
    )
    .argument('<kind>', 'apple or android')
    .argument('<id>', 'app ID or package name')
    .option('--key-id <id>', 'android: retire only this key pair (see "attest allowlist list")')
    .option('--yes', 'do not ask (needed without a terminal)')
    .option('--json', 'print the result as JSON')
    .addHelpText(
      'after',
      `
Examples:
  $ attest allowlist remove apple ABCDE12345.com.example.bank
  $ attest allowlist remove android com.example.bank --key-id 1f2e3d4c5b6a7980
  $ attest allowlist remove android com.example.bank --yes --json   # from a script`,
    )
    .action(
      async (
        kind: string,
        id: string,
        opts: { keyId?: string; yes?: boolean; json?: boolean },
        command: Command,
      ) => {
        if (kind !== 'apple' && kind !== 'android')
          throw usageError(`kind must be "apple" or "android", got "${kind}"`);
        if (kind === 'apple' && opts.keyId)
          throw usageError('--key-id applies to android packages only');
        requireConfirmation('allowlist remove', opts.yes);
        const auditor = auditorFor(command);
        await withAdmin(
          async (admin) => {
            const what = opts.keyId ? `key pair ${opts.keyId} of ${id}` : `${kind} ${id}`;
            const missing = () =>
              negativeError(`${what} is not on the allowlist; see "attest allowlist list"`);
            const found = await admin.run('allowlist.find', { kind, id });
            if (kind === 'apple') {
              if (!found) throw missing();
              await confirm(
                [
                  `This removes apple ${id} (env ${found.env}): its tokens are rejected within 5 seconds.`,
                ],
                opts.yes,
              );
            } else {
              const pairs = found?.pairs ?? [];
              if (!found || (opts.keyId && !pairs.includes(opts.keyId))) throw missing();
              await confirm(
                !opts.keyId
                  ? [
                      `This removes android ${id} with its policy and ${pairs.length} key pair(s): its tokens are rejected within 5 seconds.`,
                    ]
                  : pairs.length === 1
                    ? [
                        `This retires key pair ${opts.keyId}, the last one of ${id}: after it no token of ${id} can pass until a new pair is added.`,
                      ]
                    : [
                        `This retires key pair ${opts.keyId} of ${id}; ${pairs.filter((p) => p !== opts.keyId).join(', ')} stay(s). Tokens still encrypted with it are rejected within 5 seconds.`,
                      ],
                opts.yes,
              );
            }
            const { removed } = await admin.run('allowlist.remove', {
              kind,
              id,
              ...(opts.keyId ? { keyId: opts.keyId } : {}),
            });
            // removed by someone else while we asked
            if (!removed) throw missing();
            if (opts.json)
              printJson({ kind, id, ...(opts.keyId ? { keyId: opts.keyId } : {}), removed: true });
            else
              process.stdout.write(
                `removed ${what}; running instances stop accepting it within 5 seconds\n`,
              );
          },
          { auditor },
        );
      },
    );

  return allowlist;
}

/** `allowlist list`'s words for a package's key attestation policy. */
function keyAttestationSummary(p: {
  keyAttestation: boolean;
  minSecurityLevel: string;
  allowUnlocked: boolean;
  bootKeys: string[];
  maxPatchAgeMonths: number | null;
}): string {
  if (!p.keyAttestation) return '';
  return (
    `; key attestation: min ${p.minSecurityLevel === 'StrongBox' ? 'strongbox' : 'tee'}` +
    `${p.allowUnlocked ? ', unlocked ok' : ''}${p.bootKeys.length ? `, ${p.bootKeys.length} boot key(s)` : ''}` +
    `${p.maxPatchAgeMonths !== null ? `, patch <= ${p.maxPatchAgeMonths} months` : ''}`
  );
}

interface AndroidOptions extends KeyAttestationFlags {
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
  requireLicensed?: boolean;
  requirePlayProtect?: boolean | string;
  denyAppAccessRisk?: boolean | string;
  maxDeviceActivity?: boolean | string;
  json?: boolean;
}

/** The newer-verdict flags as policy fields; a flag not given leaves the stored value. */
function verdictPolicy(opts: AndroidOptions): AndroidPolicyInput {
  const out: AndroidPolicyInput = {};
  if (opts.requireLicensed !== undefined) out.requireLicensed = opts.requireLicensed;
  if (opts.requirePlayProtect === true) out.playProtectVerdicts = ['NO_ISSUES'];
  else if (opts.requirePlayProtect === false) out.playProtectVerdicts = [];
  else if (typeof opts.requirePlayProtect === 'string') {
    const parsed = parsePlayProtectList(opts.requirePlayProtect);
    if (!parsed.ok) throw usageError(`--require-play-protect: ${parsed.problem}`);
    out.playProtectVerdicts = parsed.values;
  }
  if (opts.denyAppAccessRisk === false) out.denyAppAccessRisk = [];
  else if (typeof opts.denyAppAccessRisk === 'string') {
    const parsed = parseAppAccessRiskList(opts.denyAppAccessRisk);
    if (!parsed.ok) throw usageError(`--deny-app-access-risk: ${parsed.problem}`);
    out.denyAppAccessRisk = parsed.values;
  }
  if (opts.maxDeviceActivity === false) out.maxDeviceActivity = null;
  else if (typeof opts.maxDeviceActivity === 'string') {
    const text = opts.maxDeviceActivity.trim().toUpperCase();
    const level = /^\d$/.test(text) ? `LEVEL_${text}` : text;
    if (!isDeviceActivityLevel(level))
      throw usageError(
        `--max-device-activity must be LEVEL_1 to LEVEL_4, got "${opts.maxDeviceActivity}"`,
      );
    out.maxDeviceActivity = level as DeviceActivityLevel;
  }
  return out;
}

/** `--service-account-file` read and checked, `null` for `--remove-service-account`, else undefined. */
async function serviceAccountOption(
  opts: AndroidOptions,
): Promise<GoogleServiceAccount | null | undefined> {
  if (opts.removeServiceAccount && opts.serviceAccountFile !== undefined)
    throw usageError('give --service-account-file or --remove-service-account, not both');
  if (opts.removeServiceAccount) return null;
  if (opts.serviceAccountFile === undefined) return undefined;
  const text = readCliFileSync(opts.serviceAccountFile, {
    maxBytes: CLI_INPUT_MAX_BYTES,
    what: '--service-account-file',
  }).toString('utf8');
  const parsed = await parseServiceAccount(text);
  if (!parsed.ok)
    throw usageError(`--service-account-file ${opts.serviceAccountFile}: ${parsed.problem}`);
  return parsed.account;
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

interface ApplePolicyOptions {
  env?: AppleEnvPolicy;
  json?: boolean;
  requireReceipt?: boolean;
  maxRiskMetric?: boolean | string;
  validationCategory?: boolean | string;
  minBundleVersion?: boolean | string;
  allowMissingValidationCategory?: boolean;
}

/** The App Attest policy fields given on the command line (absent = kept). */
export function applePolicyFromOptions(opts: ApplePolicyOptions): ApplePolicyInput {
  const out: ApplePolicyInput = {};
  if (opts.requireReceipt !== undefined) out.requireReceipt = opts.requireReceipt;
  if (opts.allowMissingValidationCategory !== undefined)
    out.allowMissingValidationCategory = opts.allowMissingValidationCategory;
  if (opts.maxRiskMetric === false) out.maxRiskMetric = null;
  else if (typeof opts.maxRiskMetric === 'string') {
    const text = opts.maxRiskMetric.trim();
    if (!/^\d{1,9}$/.test(text))
      throw usageError(
        `--max-risk-metric must be a whole number of attestations, got "${opts.maxRiskMetric}"`,
      );
    out.maxRiskMetric = Number(text);
  }
  if (opts.validationCategory === false) out.validationCategories = [];
  else if (typeof opts.validationCategory === 'string') {
    const names = opts.validationCategory
      .split(',')
      .map((n) => n.trim().toLowerCase())
      .filter(Boolean);
    const unknown = names.filter((n) => !VALIDATION_CATEGORY_NAMES.includes(n));
    if (names.length === 0 || unknown.length > 0)
      throw usageError(
        `--validation-category takes ${VALIDATION_CATEGORY_NAMES.join(', ')}; got "${opts.validationCategory}"`,
      );
    out.validationCategories = [...new Set(names)];
  }
  if (opts.minBundleVersion === false) out.minBundleVersion = null;
  else if (typeof opts.minBundleVersion === 'string') {
    if (!isBundleVersion(opts.minBundleVersion.trim()))
      throw usageError(
        `--min-bundle-version must be 1 to 4 dotted numbers (e.g. 4.2 or 1203), got "${opts.minBundleVersion}"`,
      );
    out.minBundleVersion = opts.minBundleVersion.trim();
  }
  return out;
}

/** The App Attest rules of an entry in a few words (empty when it sets none). */
export function describeApplePolicy(a: AppleAppPolicy): string {
  const parts: string[] = [];
  if (a.requireReceipt) parts.push('receipt required');
  if (a.maxRiskMetric !== undefined && a.maxRiskMetric !== null)
    parts.push(`risk <= ${a.maxRiskMetric}`);
  if (a.validationCategories?.length) parts.push(`category ${a.validationCategories.join('|')}`);
  if (a.minBundleVersion) parts.push(`bundle >= ${a.minBundleVersion}`);
  if ((a.validationCategories?.length || a.minBundleVersion) && a.allowMissingValidationCategory)
    parts.push('missing category ok');
  return parts.length ? `, ${parts.join(', ')}` : '';
}
