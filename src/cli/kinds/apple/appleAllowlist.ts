import { Command, Option } from 'commander';
import type { ResultOf } from '../../../admin/operations.js';
import { APPLE_POLICY_FIELDS } from '../../../core/apple/applePolicyFields.js';
import { describePolicy } from '../../../core/policyFields.js';
import type { AppleAppPolicy, AppleEnvPolicy } from '../../../core/ports.js';
import type { ApplePolicyInput } from '../../../db/appleAppRows.js';
import { auditorFor, withAdmin } from '../../context.js';
import { usageError } from '../../errors.js';
import { printJson } from '../../output.js';
import { warnRiskMetricWithoutKey } from '../../commands/apple.js';
import type { AllowlistKind } from '../allowlistKind.js';
import {
  addObserveOptions,
  observeChangeFromOptions,
  observeMode,
  rolloutBefore,
  rolloutNote,
  type ObserveFlags,
} from '../observeOptions.js';
import { addPolicyOptions, policyOptions } from '../policyOptions.js';
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
    );
  return addObserveOptions(addPolicyOptions(command, APPLE_POLICY_FIELDS), 'apple')
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
      const mode = observeMode(opts);
      const auditor = auditorFor(command);
      await withAdmin(
        async (admin) => {
          const before = await rolloutBefore(admin, appId, policy.observeChange, mode);
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
              `${result} apple ${appId} (env ${env}${result === 'updated' && !opts.env ? ' as before: no --env given' : ''}${describeApplePolicy(stored)})\n` +
                rolloutNote(appId, policy.observeChange, before, mode),
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
}

/** The App Attest policy fields given on the command line (absent = kept). */
export function applePolicyFromOptions(opts: ApplePolicyOptions): ApplePolicyInput {
  const out = policyOptions<ApplePolicyInput>(APPLE_POLICY_FIELDS, opts);
  const observeChange = observeChangeFromOptions('apple', opts);
  return observeChange ? { observeChange, ...out } : out;
}

/** The App Attest rules of an entry in a few words (empty when it sets none). */
export function describeApplePolicy(a: AppleAppPolicy): string {
  const parts = describePolicy(APPLE_POLICY_FIELDS, a);
  return parts.length ? `, ${parts.join(', ')}` : '';
}
