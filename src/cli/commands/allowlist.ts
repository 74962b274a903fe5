import { Command } from 'commander';
import { androidIssuersCommand } from './androidIssuers.js';
import { confirm, requireConfirmation } from '../confirm.js';
import { auditorFor, withAdmin } from '../context.js';
import { negativeError, usageError } from '../errors.js';
import { printJson, printTable } from '../output.js';
import type { AllowlistKind } from '../kinds/allowlistKind.js';
import { ALLOWLIST_KINDS } from '../kinds/registry.js';

export function allowlistCommand(): Command {
  const kinds = ALLOWLIST_KINDS;
  const allowlist = new Command('allowlist')
    .description('apps and packages whose tokens are accepted')
    .addHelpText(
      'after',
      `
Examples:
${examples([...kinds.map((k) => k.examples.add), '$ attest allowlist list', kinds[0]!.examples.remove[0]!])}`,
    );
  const add = allowlist
    .command('add')
    .description(`allow ${kinds.map((k) => k.noun).join(' or ')}`)
    .addHelpText(
      'after',
      `
Examples:
${examples(kinds.map((k) => k.examples.addHelp))}`,
    );
  for (const kind of kinds) add.addCommand(kind.addCommand());

  allowlist
    .command('list')
    .description('list allowed apps and packages (key fingerprints only, never key material)')
    .option('--json', 'print the list as JSON')
    .addHelpText('after', '\nExample:\n  $ attest allowlist list --json')
    .action(async (opts: { json?: boolean }) => {
      await withAdmin(async (admin) => {
        const list = await admin.run('allowlist.list', {});
        if (opts.json) {
          printJson(list);
          return;
        }
        printTable(
          ['KIND', 'ID', 'POLICY', 'KEY PAIRS'],
          kinds.flatMap((k) => k.listRows(list)),
        );
      });
    });

  allowlist
    .command('show')
    .description('show one app or package with its whole policy and observed rules')
    .argument('<kind>', kinds.map((k) => k.entry).join(' or '))
    .argument('<id>', 'app ID or package name')
    .option('--json', 'print the entry as JSON (as in "allowlist list --json")')
    .addHelpText('after', `\nExample:\n  $ attest allowlist show ${kinds[0]!.entry} <id> --json`)
    .action(async (name: string, id: string, opts: { json?: boolean }) => {
      const entry = kindNamed(name);
      await withAdmin(async (admin) => {
        const one = entry.pick(await admin.run('allowlist.list', {}), id);
        if (!one)
          throw negativeError(
            `${entry.entry} ${id} is not on the allowlist; see "attest allowlist list"`,
          );
        if (opts.json) printJson(one[entry.entry][0]);
        else printTable(['KIND', 'ID', 'POLICY', 'KEY PAIRS'], entry.listRows(one));
      });
    });

  allowlist
    .command('remove')
    .description(
      'remove an app or package; with --key-id, retire one key pair of a package. Asks first on a terminal',
    )
    .argument('<kind>', kinds.map((k) => k.entry).join(' or '))
    .argument('<id>', 'app ID or package name')
    .option('--key-id <id>', 'android: retire only this key pair (see "attest allowlist list")')
    .option('--yes', 'do not ask (needed without a terminal)')
    .option('--json', 'print the result as JSON')
    .addHelpText(
      'after',
      `
Examples:
${examples(kinds.flatMap((k) => k.examples.remove))}`,
    )
    .action(
      async (
        name: string,
        id: string,
        opts: { keyId?: string; yes?: boolean; json?: boolean },
        command: Command,
      ) => {
        const entry = kindNamed(name);
        const kind = entry.entry;
        entry.checkRemove(opts.keyId);
        requireConfirmation('allowlist remove', opts.yes);
        const auditor = auditorFor(command);
        await withAdmin(
          async (admin) => {
            const what = opts.keyId ? `key pair ${opts.keyId} of ${id}` : `${kind} ${id}`;
            const missing = () =>
              negativeError(`${what} is not on the allowlist; see "attest allowlist list"`);
            const found = await admin.run('allowlist.find', { kind, id });
            const prompt = entry.removePrompt(id, opts.keyId, found);
            if (!prompt) throw missing();
            await confirm(prompt, opts.yes);
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

  // the deployment's own blocklist of Android issuing certificates (leaked keyboxes)
  allowlist.addCommand(androidIssuersCommand());

  return allowlist;
}

/** The allowlist entry kind that `name` names, or a usage error. */
function kindNamed(name: string): AllowlistKind {
  const entry = ALLOWLIST_KINDS.find((k) => k.entry === name);
  if (!entry)
    throw usageError(
      `kind must be ${ALLOWLIST_KINDS.map((k) => `"${k.entry}"`).join(' or ')}, got "${name}"`,
    );
  return entry;
}

/** Help example lines, indented as commander's help text is. */
function examples(lines: string[]): string {
  return lines.map((l) => `  ${l}`).join('\n');
}
