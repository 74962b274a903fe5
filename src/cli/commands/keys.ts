import { Command } from 'commander';
import { confirm, requireConfirmation } from '../confirm.js';
import { auditorFor, config, withAdmin } from '../context.js';
import { durationProblem, parseDuration } from '../../duration.js';
import { negativeError, usageError } from '../errors.js';
import { printJson, printTable, when } from '../output.js';
import { PRINTABLE_NAME_RULE } from '../../config.js';
import { safeText } from '../terminalText.js';

/** An API key id: what follows the prefix in a key (core/apiKeys.ts). */
const ID = /^[0-9a-z]{16}$/;

export function keysCommand(): Command {
  const keys = new Command('keys').description('API keys of relying parties').addHelpText(
    'after',
    `
Examples:
  $ attest keys create --name "mobile banking" --expires-in 90d
  $ attest keys create --name payments --result-tokens
  $ attest keys list
  $ attest keys update 0h3k5x9q2m7c1b4n --result-tokens on
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
    .option('--json', 'print {"id","name","mode","resultTokens","key","createdAt","expiresAt"}')
    .addHelpText(
      'after',
      '\nExamples:\n  $ attest keys create --name "mobile banking" --expires-in 90d\n  $ attest keys create --name ci --test --json | jq -r .key',
    )
    .action(
      async (
        opts: {
          name?: string;
          expiresIn?: string;
          test?: boolean;
          resultTokens?: boolean;
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
        const auditor = auditorFor(command);
        const { id, key } = generateApiKey(config().apiKeyPrefix);
        const hash = await hashApiKey(key);
        await withAdmin(
          async (admin) => {
            const row = await admin.run('keys.create', {
              id,
              name,
              hash,
              precheck: apiKeyCheck(key),
              expiresInSeconds: expiresIn,
              mode: opts.test ? 'test' : 'live',
              resultTokens: opts.resultTokens === true,
            });
            if (opts.json) {
              printJson({
                id: row.id,
                name: row.name,
                mode: row.mode,
                resultTokens: row.resultTokens,
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
              process.stdout.write(
                `created ${row.mode} API key ${row.id} (${safeText(row.name)}), expires ${row.expiresAt ? when(row.expiresAt) : 'never'}\n\n  ${key}\n\nStore it now: it is not shown again.\n${testNote}${tokenNote}`,
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
    .option('--json', 'print the result as JSON')
    .addHelpText(
      'after',
      '\nExamples:\n  $ attest keys update 0h3k5x9q2m7c1b4n --result-tokens on\n  $ attest keys update 0h3k5x9q2m7c1b4n --result-tokens off --json',
    )
    .action(
      async (id: string, opts: { resultTokens?: string; json?: boolean }, command: Command) => {
        await checkId(id, 'update');
        if (opts.resultTokens === undefined)
          throw usageError('nothing to change: give --result-tokens on or --result-tokens off');
        if (opts.resultTokens !== 'on' && opts.resultTokens !== 'off')
          throw usageError(`--result-tokens takes on or off, got "${opts.resultTokens}"`);
        const on = opts.resultTokens === 'on';
        const auditor = auditorFor(command);
        await withAdmin(
          async (admin) => {
            const { found, changed } = await admin.run('keys.setResultTokens', { id, on });
            if (!found) throw negativeError(`no API key with id "${id}"; see "attest keys list"`);
            if (opts.json) printJson({ id, resultTokens: on, changed });
            else
              process.stdout.write(
                changed
                  ? `result tokens ${opts.resultTokens} for ${id}; every instance applies it within 5 seconds\n`
                  : `result tokens were already ${opts.resultTokens} for ${id}\n`,
              );
            if (on && changed && config().issuer === undefined)
              process.stderr.write(
                'attest: ATTEST_ISSUER is not set here: the server needs it to sign result tokens (it refuses to start without it while a key uses them)\n',
              );
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
