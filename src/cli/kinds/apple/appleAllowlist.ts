import { Command, Option } from 'commander';
import type { ResultOf } from '../../../admin/operations.js';
import {
  isBundleVersion,
  VALIDATION_CATEGORY_NAMES,
} from '../../../core/apple/appleDistribution.js';
import type { AppleAppPolicy, AppleEnvPolicy } from '../../../core/types.js';
import type { ApplePolicyInput } from '../../../db/allowlist.js';
import { auditorFor, withAdmin } from '../../context.js';
import { addDeviceLimitOptions, deviceLimitOption, formatDeviceLimit } from '../../deviceLimit.js';
import { usageError } from '../../errors.js';
import { printJson } from '../../output.js';
import { warnRiskMetricWithoutKey } from '../../commands/apple.js';
import type { AllowlistKind } from '../allowlistKind.js';
import {
  addObserveOptions,
  observeChangeFromOptions,
  type ObserveFlags,
} from '../observeOptions.js';
import { APPLE_APP_ID } from './appleAppId.js';

/** App Attest apps on the allowlist: `allowlist add apple`, their rows and their removal. */
export const appleAllowlist: AllowlistKind = {
  entry: 'apple',
  noun: 'an iOS app',
  addCommand: appleAllowCommand,
  pick(list, id) {
    const apple = list.apple.filter((a) => a.appId === id);
    return apple.length ? { apple, android: [] } : null;
  },
  listRows: ({ apple }: ResultOf<'allowlist.list'>) =>
    apple.map((a) => ['apple', a.appId, `env ${a.env}${describeApplePolicy(a)}`, '-']),
  checkRemove(keyId) {
    if (keyId) throw usageError('--key-id applies to android packages only');
  },
  removePrompt: (id, _keyId, found) =>
    found && [
      `This removes apple ${id} (env ${found.env}): its tokens are rejected within 5 seconds.`,
    ],
  examples: {
    add: '$ attest allowlist add apple ABCDE12345.com.example.bank',
    addHelp: '$ attest allowlist add apple ABCDE12345.com.example.bank --env any',
    remove: ['$ attest allowlist remove apple ABCDE12345.com.example.bank'],
  },
};

/** `attest allowlist add apple`: allow an App Attest app ID with its policy. */
function appleAllowCommand(): Command {
  const command = new Command('apple')
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
    );
  return addObserveOptions(
    addDeviceLimitOptions(
      command,
      'an App Attest key (its key id): its registration and every assertion count',
    ),
    'apple',
  )
    .option('--json', 'print the result as JSON')
    .addHelpText(
      'after',
      '\nExamples:\n  $ attest allowlist add apple ABCDE12345.com.example.bank\n  $ attest allowlist add apple ABCDE12345.com.example.bank.beta --env any\n  $ attest allowlist add apple ABCDE12345.com.example.bank --require-receipt --max-risk-metric 5\n  $ attest allowlist add apple ABCDE12345.com.example.bank --validation-category appstore --min-bundle-version 4.2 --allow-missing-validation-category\n  $ attest allowlist add apple ABCDE12345.com.example.bank --max-verifies-per-device 100/1h\n  $ attest allowlist add apple ABCDE12345.com.example.bank --observe apple_risk_exceeded   # record, do not reject\n  $ attest allowlist add apple ABCDE12345.com.example.bank --enforce all',
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
}

interface ApplePolicyOptions extends ObserveFlags {
  env?: AppleEnvPolicy;
  json?: boolean;
  requireReceipt?: boolean;
  maxRiskMetric?: boolean | string;
  validationCategory?: boolean | string;
  minBundleVersion?: boolean | string;
  allowMissingValidationCategory?: boolean;
  maxVerifiesPerDevice?: boolean | string;
}

/** The App Attest policy fields given on the command line (absent = kept). */
export function applePolicyFromOptions(opts: ApplePolicyOptions): ApplePolicyInput {
  const out: ApplePolicyInput = {};
  const observeChange = observeChangeFromOptions('apple', opts);
  if (observeChange) out.observeChange = observeChange;
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
  const limit = deviceLimitOption(opts.maxVerifiesPerDevice);
  if (limit !== undefined) out.maxVerifiesPerDevice = limit;
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
  if (a.observe?.length) parts.push(`observe ${a.observe.join('|')}`);
  if (a.maxVerifiesPerDevice) parts.push(`${formatDeviceLimit(a.maxVerifiesPerDevice)} per device`);
  return parts.length ? `, ${parts.join(', ')}` : '';
}
