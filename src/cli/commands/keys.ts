import { Command } from 'commander';
import { confirm, requireConfirmation } from '../confirm.js';
import { auditorFor, config, withAdmin } from '../context.js';
import { durationProblem, parseDuration } from '../../core/duration.js';
import { negativeError, usageError } from '../errors.js';
import { printJson, printTable, when } from '../output.js';
import { PRINTABLE_NAME_RULE } from '../../core/printableName.js';
import { safeText } from '../terminalText.js';
import { parseAppList } from '../appList.js';
import type { Admin } from '../admin.js';

/** An API key id: what follows the prefix in a key (core/apiKeys.ts). */
const ID = /^[0-9a-z]{16}$/;

export function keysCommand(): Command {
  const keys = new Command('keys').description('API keys of relying parties').addHelpText(
    'after',
    `
Examples:
  $ attest keys create --name "mobile banking" --expires-in 90d
  $ attest keys create --name payments --result-tokens
  $ attest keys create --name "android app backend" --rejection-details
  $ attest keys create --name "ios backend" --apps ABCDE12345.com.example.app
  $ attest keys list
  $ attest keys update 0h3k5x9q2m7c1b4n --result-tokens on
  $ attest keys update 0h3k5x9q2m7c1b4n --apps ABCDE12345.com.example.app,com.example.app
  $ attest keys revoke 0h3k5x9q2m7c1b4n`,
  );

  keys
    .command('create')
    .description('issue an API key; it is printed once and only its hash is stored')
    // checked in the action, so that a misspelt option (--nme) is reported as such first
    .option('--name <name>', 'who the key is for (shown in lists and logs); required')
    .option(
      '--expires-in <duration>',
      'lifetime with its unit: 90d, 12h, 2w, 30m (default: no expiry)',
    )
    .option(
      '--test',
      "a test-mode key: its verifications also trust this deployment's development roots (attest dev ...)",
    )
    .option(
      '--result-tokens',
      'valid verifies with this key also carry a signed result token (needs ATTEST_ISSUER on the server)',
    )
    .option(
      '--rejection-details',
      'rejections with this key say why: rejection {reason, remediation?} with the reason code and, for a Play cause the user can fix, the Play dialog to show (docs/device-integration.md)',
    )
    .option(
      '--apps <ids>',
      'comma-separated App Attest app IDs (TEAMID.bundle.id) and Android packages: the key verifies tokens of these apps only (default: every allowlisted app)',
    )
    .option(
      '--json',
      'print {"id","name","mode","resultTokens","rejectionDetails","apps","key","createdAt","expiresAt"}',
    )
    .addHelpText(
      'after',
      '\nExamples:\n  $ attest keys create --name "mobile banking" --expires-in 90d\n  $ attest keys create --name ci --test --json | jq -r .key\n  $ attest keys create --name "android backend" --apps com.example.app,com.example.lite',
    )
    .action(
      async (
        opts: {
          name?: string;
          expiresIn?: string;
          test?: boolean;
          resultTokens?: boolean;
          rejectionDetails?: boolean;
          apps?: string;
          json?: boolean;
        },
        command: Command,
      ) => {
        // core/apiKeys.js loads argon2: only the commands that make or read a key pay for it
        const { apiKeyCheck, generateApiKey, hashApiKey, isApiKeyName } =
          await import('../../core/apiKeys.js');
        if (opts.name === undefined)
          throw usageError("required option '--name <name>' not specified");
        const name = opts.name.trim();
        if (!isApiKeyName(name)) throw usageError(`--name ${PRINTABLE_NAME_RULE}`);
        const expiresIn = opts.expiresIn === undefined ? null : parseDuration(opts.expiresIn);
        if (expiresIn === null && opts.expiresIn !== undefined)
          throw usageError(durationProblem('--expires-in', opts.expiresIn));
        const apps = opts.apps === undefined ? null : parseAppList(opts.apps, '--apps');
        const auditor = auditorFor(command);
        const { id, key } = generateApiKey(config().apiKeyPrefix);
        const hash = await hashApiKey(key);
        await withAdmin(
          async (admin) => {
            if (apps) await warnNotAllowlisted(admin, apps);
            const row = await admin.run('keys.create', {
              id,
              name,
              hash,
              precheck: apiKeyCheck(key),
              expiresInSeconds: expiresIn,
              mode: opts.test ? 'test' : 'live',
              resultTokens: opts.resultTokens === true,
              ...(opts.rejectionDetails ? { rejectionDetails: true } : {}),
              ...(apps ? { apps } : {}),
            });
            if (opts.json) {
              printJson({
                id: row.id,
                name: row.name,
                mode: row.mode,
                resultTokens: row.resultTokens,
                rejectionDetails: row.rejectionDetails,
                apps: row.apps,
                key,
                createdAt: row.createdAt.toISOString(),
                expiresAt: row.expiresAt?.toISOString() ?? null,
              });
            } else {
              const testNote =
                row.mode === 'test'
                  ? 'This is a TEST key: it also accepts tokens from "attest dev mint"; never ship it in production.\n'
                  : '';
              const tokenNote = row.resultTokens
                ? 'Its valid verifies carry a result token (the server needs ATTEST_ISSUER).\n'
                : '';
              const reasonNote = row.rejectionDetails
                ? 'Its rejections say why (rejection: {reason, remediation?}).\n'
                : '';
              const scopeNote = row.apps
                ? `It verifies tokens of ${row.apps.join(', ')} only.\n`
                : '';
              process.stdout.write(
                `created ${row.mode} API key ${row.id} (${safeText(row.name)}), expires ${row.expiresAt ? when(row.expiresAt) : 'never'}\n\n  ${key}\n\nStore it now: it is not shown again.\n${testNote}${tokenNote}${reasonNote}${scopeNote}`,
              );
            }
          },
          { auditor },
        );
      },
    );

  keys
    .command('list')
    .description('list API keys (never the key or its hash)')
    .option('--json', 'print the list as JSON')
    .addHelpText('after', '\nExample:\n  $ attest keys list')
    .action(async (opts: { json?: boolean }) => {
      await withAdmin(async (admin) => {
        const rows = await admin.run('keys.list', {});
        const now = Date.now();
        const state = (r: (typeof rows)[number]) =>
          r.revokedAt
            ? 'revoked'
            : r.expiresAt && r.expiresAt.getTime() <= now
              ? 'expired'
              : 'active';
        if (opts.json) {
          printJson(
            rows.map((r) => ({
              id: r.id,
              name: r.name,
              mode: r.mode,
              resultTokens: r.resultTokens,
              rejectionDetails: r.rejectionDetails,
              apps: r.apps,
              state: state(r),
              createdAt: r.createdAt,
              lastUsedAt: r.lastUsedAt,
              expiresAt: r.expiresAt,
              revokedAt: r.revokedAt,
            })),
          );
        } else {
          printTable(
            [
              'ID',
              'NAME',
              'MODE',
              'STATE',
              'CREATED',
              'LAST USED',
              'EXPIRES',
              'REVOKED',
              'RESULT TOKENS',
              'REJECTION DETAILS',
              'APPS',
            ],
            rows.map((r) => [
              r.id,
              r.name,
              r.mode,
              state(r),
              when(r.createdAt),
              when(r.lastUsedAt),
              when(r.expiresAt),
              when(r.revokedAt),
              r.resultTokens ? 'on' : 'off',
              r.rejectionDetails ? 'on' : 'off',
              r.apps ? r.apps.join(',') : 'all',
            ]),
          );
        }
      });
    });

  keys
    .command('update')
    .description('change an API key; every running instance applies it within 5 seconds')
    .argument('<id>', 'the key id, as shown by "attest keys list" (never the key itself)')
    .option(
      '--result-tokens <on|off>',
      'whether valid verifies with this key carry a signed result token',
    )
    .option(
      '--rejection-details <on|off>',
      'whether rejections with this key say why (rejection: {reason, remediation?})',
    )
    .option(
      '--apps <ids>',
      'comma-separated App Attest app IDs and Android packages: the key verifies tokens of these apps only (replaces its list)',
    )
    .option('--all-apps', 'the key verifies tokens of every allowlisted app again (no scope)')
    .option('--json', 'print the result as JSON')
    .addHelpText(
      'after',
      '\nExamples:\n  $ attest keys update 0h3k5x9q2m7c1b4n --result-tokens on\n  $ attest keys update 0h3k5x9q2m7c1b4n --rejection-details on\n  $ attest keys update 0h3k5x9q2m7c1b4n --result-tokens off --json\n  $ attest keys update 0h3k5x9q2m7c1b4n --apps ABCDE12345.com.example.app,com.example.app\n  $ attest keys update 0h3k5x9q2m7c1b4n --all-apps',
    )
    .action(
      async (
        id: string,
        opts: {
          resultTokens?: string;
          rejectionDetails?: string;
          apps?: string;
          allApps?: boolean;
          json?: boolean;
        },
        command: Command,
      ) => {
        await checkId(id, 'update');
        if (opts.apps !== undefined && opts.allApps)
          throw usageError('give --apps or --all-apps, not both');
        if (
          opts.resultTokens === undefined &&
          opts.rejectionDetails === undefined &&
          opts.apps === undefined &&
          !opts.allApps
        )
          throw usageError(
            'nothing to change: give --result-tokens on|off, --rejection-details on|off, --apps ID[,ID...] or --all-apps',
          );
        for (const [flag, value] of [
          ['--result-tokens', opts.resultTokens],
          ['--rejection-details', opts.rejectionDetails],
        ] as const)
          if (value !== undefined && value !== 'on' && value !== 'off')
            throw usageError(`${flag} takes on or off, got "${safeText(value)}"`);
        const apps =
          opts.apps !== undefined
            ? parseAppList(opts.apps, '--apps')
            : opts.allApps
              ? null
              : undefined;
        const auditor = auditorFor(command);
        await withAdmin(
          async (admin) => {
            const notFound = () =>
              negativeError(`no API key with id "${id}"; see "attest keys list"`);
            const out: Record<string, unknown> = { id };
            const lines: string[] = [];
            if (opts.resultTokens !== undefined) {
              const on = opts.resultTokens === 'on';
              const { found, changed } = await admin.run('keys.setResultTokens', { id, on });
              if (!found) throw notFound();
              Object.assign(out, { resultTokens: on, changed });
              lines.push(
                changed
                  ? `result tokens ${opts.resultTokens} for ${id}; every instance applies it within 5 seconds`
                  : `result tokens were already ${opts.resultTokens} for ${id}`,
              );
              if (on && changed && config().issuer === undefined)
                process.stderr.write(
                  'attest: ATTEST_ISSUER is not set here: the server needs it to sign result tokens (it refuses to start without it while a key uses them)\n',
                );
            }
            if (opts.rejectionDetails !== undefined) {
              const on = opts.rejectionDetails === 'on';
              const { found, changed } = await admin.run('keys.setRejectionDetails', { id, on });
              if (!found) throw notFound();
              out.rejectionDetails = on;
              out.changed = out.changed === true || changed;
              lines.push(
                changed
                  ? `rejection details ${opts.rejectionDetails} for ${id}; every instance applies it within 5 seconds`
                  : `rejection details were already ${opts.rejectionDetails} for ${id}`,
              );
            }
            if (apps !== undefined) {
              const scoped = await admin.run('keys.setApps', { id, apps });
              if (!scoped.found) throw notFound();
              // once the key is known: an unknown key is one line, the negative answer
              if (apps) await warnNotAllowlisted(admin, apps);
              out.apps = scoped.apps;
              out.changed = out.changed === true || scoped.changed;
              const shown = scoped.apps ? scoped.apps.join(', ') : 'every allowlisted app';
              lines.push(
                scoped.changed
                  ? `${id} now verifies tokens of ${shown}; every instance applies it within 5 seconds`
                  : `${id} already verified tokens of ${shown}`,
              );
            }
            if (opts.json) printJson(out);
            else process.stdout.write(`${lines.join('\n')}\n`);
          },
          { auditor },
        );
      },
    );

  keys
    .command('revoke')
    .description(
      'revoke an API key; every running instance refuses it within 5 seconds. Asks first on a terminal',
    )
    .argument('<id>', 'the key id, as shown by "attest keys list" (never the key itself)')
    .option('--yes', 'do not ask (needed without a terminal)')
    .option('--json', 'print the result as JSON')
    .addHelpText(
      'after',
      '\nExamples:\n  $ attest keys revoke 0h3k5x9q2m7c1b4n\n  $ attest keys revoke 0h3k5x9q2m7c1b4n --yes --json   # from a script',
    )
    .action(async (id: string, opts: { yes?: boolean; json?: boolean }, command: Command) => {
      await checkId(id, 'revoke');
      requireConfirmation('keys revoke', opts.yes);
      const auditor = auditorFor(command);
      await withAdmin(
        async (admin) => {
          const existing = await admin.run('keys.find', { id });
          if (!existing) throw negativeError(`no API key with id "${id}"; see "attest keys list"`);
          let revoked = false;
          if (!existing.revokedAt) {
            await confirm(
              [
                `This revokes API key ${id} (${safeText(existing.name)}), created ${when(existing.createdAt)}, last used ${when(existing.lastUsedAt)}.`,
                'Every running instance refuses it within 5 seconds; a revoked key cannot be restored.',
              ],
              opts.yes,
            );
            ({ revoked } = await admin.run('keys.revoke', { id }));
          }
          if (opts.json) printJson({ id, revoked: true, alreadyRevoked: !revoked });
          else
            process.stdout.write(
              revoked
                ? `revoked ${id} (${safeText(existing.name)})\n`
                : `${id} was already revoked\n`,
            );
        },
        { auditor },
      );
    });

  return keys;
}

/** A usage error unless `id` is an API key id; a whole key is never repeated, not even in the error. */
async function checkId(id: string, verb: string): Promise<void> {
  const { parseApiKey } = await import('../../core/apiKeys.js');
  const whole = parseApiKey(id.trim());
  if (whole)
    throw usageError(
      `that is a whole API key, not its id; its id is ${whole.id}: "attest keys ${verb} ${whole.id}" (and treat the key as exposed)`,
    );
  if (!ID.test(id))
    throw usageError('an API key id is 16 characters of 0-9 and a-z, as "attest keys list" shows');
}

/**
 * A scope may name apps not allowlisted yet (docs/cli.md), so this is a warning, not a refusal:
 * it catches a misspelt ID, which would leave the key verifying nothing of that app.
 */
async function warnNotAllowlisted(admin: Admin, apps: readonly string[]): Promise<void> {
  const ids = await admin.run('allowlist.ids', {});
  const known = new Set([...ids.apple, ...ids.android]);
  const missing = apps.filter((a) => !known.has(a));
  if (missing.length > 0)
    process.stderr.write(
      `attest: warning: ${missing.map(safeText).join(', ')} ${missing.length === 1 ? 'is' : 'are'} not allowlisted (yet?): the key verifies no token of ${missing.length === 1 ? 'it' : 'them'} until ${missing.length === 1 ? 'it is' : 'they are'}; check the spelling with "attest allowlist list"\n`,
    );
}
