import { Command } from 'commander';
import { generateApiKey, hashApiKey, parseApiKey } from '../../core/apiKeys.js';
import type { KeyMode } from '../../core/types.js';
import { createApiKeyRepository, type ApiKeyRow } from '../../db/apiKeys.js';
import type { Auditor } from '../../db/audit.js';
import type { DatabaseHandle } from '../../db/client.js';
import { confirm, requireConfirmation } from '../confirm.js';
import { auditorFor, config, withDatabase } from '../context.js';
import { durationProblem, parseDuration } from '../duration.js';
import { negativeError, usageError } from '../errors.js';
import { printJson, printTable, when } from '../output.js';

/**
 * Issues an API key on `handle`: what `keys create` does, for callers that hold the database
 * already (`attest dev up`, on its own server's handle). The key is returned once; only its hash
 * is stored.
 */
export async function createApiKey(
  handle: DatabaseHandle,
  input: { name: string; expiresInSeconds: number | null; mode: KeyMode },
  auditor: Auditor,
): Promise<{ row: ApiKeyRow; key: string }> {
  const { id, key } = generateApiKey(config().apiKeyPrefix);
  const hash = await hashApiKey(key);
  const row = await createApiKeyRepository(handle.db).insert(
    { id, name: input.name, hash, expiresInSeconds: input.expiresInSeconds, mode: input.mode },
    auditor,
  );
  return { row, key };
}

/** An API key id: what follows the prefix in a key (core/apiKeys.ts). */
const ID = /^[0-9a-z]{16}$/;

export function keysCommand(): Command {
  const keys = new Command('keys').description('API keys of relying parties').addHelpText(
    'after',
    `
Examples:
  $ attest keys create --name "mobile banking" --expires-in 90d
  $ attest keys list
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
    .option('--json', 'print {"id","name","mode","key","createdAt","expiresAt"}')
    .addHelpText(
      'after',
      '\nExamples:\n  $ attest keys create --name "mobile banking" --expires-in 90d\n  $ attest keys create --name ci --test --json | jq -r .key',
    )
    .action(
      async (
        opts: { name?: string; expiresIn?: string; test?: boolean; json?: boolean },
        command: Command,
      ) => {
        if (opts.name === undefined)
          throw usageError("required option '--name <name>' not specified");
        const name = opts.name.trim();
        if (!name || name.length > 100) throw usageError('--name must be 1 to 100 characters');
        const expiresIn = opts.expiresIn === undefined ? null : parseDuration(opts.expiresIn);
        if (expiresIn === null && opts.expiresIn !== undefined)
          throw usageError(durationProblem('--expires-in', opts.expiresIn));
        const auditor = auditorFor(command);
        await withDatabase(async (handle) => {
          const { row, key } = await createApiKey(
            handle,
            { name, expiresInSeconds: expiresIn, mode: opts.test ? 'test' : 'live' },
            auditor,
          );
          if (opts.json) {
            printJson({
              id: row.id,
              name: row.name,
              mode: row.mode,
              key,
              createdAt: row.createdAt.toISOString(),
              expiresAt: row.expiresAt?.toISOString() ?? null,
            });
          } else {
            const testNote =
              row.mode === 'test'
                ? 'This is a TEST key: it also accepts tokens from "attest dev mint"; never ship it in production.\n'
                : '';
            process.stdout.write(
              `created ${row.mode} API key ${row.id} (${row.name}), expires ${row.expiresAt ? when(row.expiresAt) : 'never'}\n\n  ${key}\n\nStore it now: it is not shown again.\n${testNote}`,
            );
          }
        });
      },
    );

  keys
    .command('list')
    .description('list API keys (never the key or its hash)')
    .option('--json', 'print the list as JSON')
    .addHelpText('after', '\nExample:\n  $ attest keys list')
    .action(async (opts: { json?: boolean }) => {
      await withDatabase(async (handle) => {
        const rows = await createApiKeyRepository(handle.db).list();
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
              state: state(r),
              createdAt: r.createdAt,
              lastUsedAt: r.lastUsedAt,
              expiresAt: r.expiresAt,
              revokedAt: r.revokedAt,
            })),
          );
        } else {
          printTable(
            ['ID', 'NAME', 'MODE', 'STATE', 'CREATED', 'LAST USED', 'EXPIRES', 'REVOKED'],
            rows.map((r) => [
              r.id,
              r.name,
              r.mode,
              state(r),
              when(r.createdAt),
              when(r.lastUsedAt),
              when(r.expiresAt),
              when(r.revokedAt),
            ]),
          );
        }
      });
    });

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
      const whole = parseApiKey(id.trim());
      // a key is a secret: never repeat it, not even in an error
      if (whole)
        throw usageError(
          `that is a whole API key, not its id; its id is ${whole.id}: "attest keys revoke ${whole.id}" (and treat the key as exposed)`,
        );
      if (!ID.test(id))
        throw usageError(
          'an API key id is 16 characters of 0-9 and a-z, as "attest keys list" shows',
        );
      requireConfirmation('keys revoke', opts.yes);
      const auditor = auditorFor(command);
      await withDatabase(async (handle) => {
        const repo = createApiKeyRepository(handle.db);
        const existing = await repo.find(id);
        if (!existing) throw negativeError(`no API key with id "${id}"; see "attest keys list"`);
        let revoked = false;
        if (!existing.revokedAt) {
          await confirm(
            [
              `This revokes API key ${id} (${existing.name}), created ${when(existing.createdAt)}, last used ${when(existing.lastUsedAt)}.`,
              'Every running instance refuses it within 5 seconds; a revoked key cannot be restored.',
            ],
            opts.yes,
          );
          revoked = await repo.revoke(id, auditor);
        }
        if (opts.json) printJson({ id, revoked: true, alreadyRevoked: !revoked });
        else
          process.stdout.write(
            revoked ? `revoked ${id} (${existing.name})\n` : `${id} was already revoked\n`,
          );
      });
    });

  return keys;
}
