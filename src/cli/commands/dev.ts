import { createHash, X509Certificate } from 'node:crypto';
import { Command } from 'commander';
import { auditorFor, withAdmin } from '../context.js';
import { printJson } from '../output.js';
import { KINDS } from '../kinds/registry.js';
import { devUpCommand } from './devUp.js';

export function devCommand(): Command {
  const dev = new Command('dev')
    .description('development roots and test tokens for test-mode API keys (no device needed)')
    .addHelpText(
      'after',
      `
Examples:
  $ attest dev up                  # the service, a test key and the development CA, in one command
  $ attest dev init
${KINDS.map((k) => `  ${k.examples.dev}`).join('\n')}`,
    );

  dev.addCommand(devUpCommand());

  dev
    .command('init')
    .description(
      'create the development App Attest CA in the database (once; test API keys trust it)',
    )
    .option('--rotate', 'replace the existing CA: tokens minted under the old one stop verifying')
    .option('--json', 'print {"created","rotated","rootSha256","createdAt"}')
    .addHelpText('after', '\nExamples:\n  $ attest dev init\n  $ attest dev init --rotate')
    .action(async (opts: { rotate?: boolean; json?: boolean }, command: Command) => {
      const auditor = auditorFor(command);
      await withAdmin(
        async (admin) => {
          const { stored, ...ca } = await admin.run('dev.init', { rotate: opts.rotate === true });
          const rootSha256 = createHash('sha256').update(ca.rootCert).digest('hex');
          if (opts.json) {
            printJson({
              created: stored,
              rotated: stored && opts.rotate === true,
              rootSha256,
              createdAt: ca.createdAt.toISOString(),
            });
            return;
          }
          const subject = new X509Certificate(ca.rootCert).subject.replace(/\n/g, ', ');
          process.stdout.write(
            stored
              ? `${opts.rotate ? 'replaced the' : 'created a'} development App Attest CA (${subject}; root SHA-256 ${rootSha256}); test API keys trust it, live keys never do\n`
              : `the development App Attest CA exists (created ${ca.createdAt.toISOString()}; root SHA-256 ${rootSha256}); "attest dev init --rotate" replaces it\n`,
          );
        },
        { auditor },
      );
    });

  const mint = dev
    .command('mint')
    .description('mint a token as a device would, for test API keys')
    .addHelpText(
      'after',
      `
Examples:
${KINDS.flatMap((k) => (k.examples.devMint ? [`  ${k.examples.devMint}`] : [])).join('\n')}`,
    );
  for (const kind of KINDS) mint.addCommand(kind.mintCommand());

  return dev;
}
