import { Command } from 'commander';
import { normalizeSerial } from '../../core/androidKey/issuerBlocklist.js';
import { auditorFor, withAdmin } from '../context.js';
import { usageError } from '../errors.js';
import { printJson, printTable } from '../output.js';
import { safeText } from '../terminalText.js';

function serialOf(text: string): string {
  const serial = normalizeSerial(text);
  if (serial === null)
    throw usageError(
      `"${safeText(text)}" is not a certificate serial: give it in hex (colons allowed), as attest stats and openssl x509 -serial print it`,
    );
  return serial;
}

/**
 * `attest allowlist android-issuers block|unblock|list`: the deployment's own blocklist of
 * Android issuing certificates (a leaked keybox), refused as android_chain_revoked.
 */
export function androidIssuersCommand(): Command {
  const issuers = new Command('android-issuers')
    .description(
      'issuing certificates (the one above an android-key leaf) whose new keys are refused: a leaked keybox',
    )
    .addHelpText(
      'after',
      `
A registration whose issuing certificate has a blocked serial is refused as android_chain_revoked
(running instances see a change within 5 seconds); keys registered before are not affected.
Block and unblock are audited (android_issuers.block, android_issuers.unblock).

Examples:
  $ attest stats                                  issuers nearest --max-keys-per-issuer
  $ attest allowlist android-issuers block 6f3a9c21e4b0d57a
  $ attest allowlist android-issuers list --json
  $ attest allowlist android-issuers unblock 6f3a9c21e4b0d57a`,
    );
  for (const [name, operation, done, same] of [
    ['block', 'androidIssuers.block', 'blocked', 'already blocked'],
    ['unblock', 'androidIssuers.unblock', 'unblocked', 'was not blocked'],
  ] as const)
    issuers
      .command(name)
      .description(`${name} an issuing certificate by its serial (hex)`)
      .argument('<serial>', 'the serial in hex')
      .option('--json', 'print the result as JSON')
      .addHelpText(
        'after',
        `\nExample:\n  $ attest allowlist android-issuers ${name} 6f3a9c21e4b0d57a`,
      )
      .action(async (text: string, opts: { json?: boolean }, command: Command) => {
        const serial = serialOf(text);
        await withAdmin(
          async (admin) => {
            const { changed } = await admin.run(operation, { serial });
            if (opts.json) printJson({ serial, changed });
            else process.stdout.write(`${serial}: ${changed ? done : same}\n`);
          },
          { auditor: auditorFor(command) },
        );
      });
  issuers
    .command('list')
    .description('list the blocked issuing certificates')
    .option('--json', 'print the list as JSON')
    .addHelpText('after', '\nExample:\n  $ attest allowlist android-issuers list --json')
    .action(async (opts: { json?: boolean }) => {
      await withAdmin(async (admin) => {
        const list = await admin.run('androidIssuers.list', {});
        if (opts.json) printJson(list.map((b) => ({ ...b, createdAt: b.createdAt.toISOString() })));
        else
          printTable(
            ['SERIAL', 'BLOCKED AT'],
            list.map((b) => [b.serial, b.createdAt.toISOString()]),
          );
      });
    });
  return issuers;
}
