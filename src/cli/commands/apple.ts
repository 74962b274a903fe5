import { Command } from 'commander';
import { decodeBase64 } from '../../core/base64.js';
import type { Admin } from '../admin.js';
import { confirm, requireConfirmation } from '../confirm.js';
import { auditorFor, withAdmin } from '../context.js';
import { readCliFileSync } from '../inputFiles.js';
import { negativeError, usageError } from '../errors.js';
import { printJson, printTable } from '../output.js';
import { safeText } from '../terminalText.js';

/**
 * Warns on stderr when an app's `--max-risk-metric` can never fire: the risk metric comes only
 * from receipts serve refreshes with Apple, which needs the team's DeviceCheck key.
 */
export async function warnRiskMetricWithoutKey(
  admin: Admin,
  appId: string,
  maxRiskMetric: number | null | undefined,
): Promise<void> {
  if (maxRiskMetric === null || maxRiskMetric === undefined) return;
  const teamId = appId.slice(0, appId.indexOf('.'));
  const teams = await admin.run('apple.credentials.list', {});
  if (teams.some((c) => c.teamId === teamId)) return;
  process.stderr.write(
    `attest: warning: --max-risk-metric ${maxRiskMetric} can never fire for ${appId}: the risk metric comes from receipts refreshed with Apple, and team ${teamId} has no DeviceCheck key (attest apple credentials add ${teamId} --key-id KEY_ID --private-key-file AuthKey_KEY_ID.p8)\n`,
  );
}

/** `attest apple`: DeviceCheck credentials for receipt refresh, and stored receipts. */
export function appleCommand(): Command {
  const apple = new Command('apple')
    .description("App Attest receipts: DeviceCheck keys for Apple's risk metric, stored receipts")
    .addHelpText(
      'after',
      `
Examples:
  $ attest apple credentials add ABCDE12345 --key-id KEY1234567 --private-key-file AuthKey_KEY1234567.p8
  $ attest apple credentials list
  $ attest apple receipts show 2o0syRGn1HDKDv85d522XBC9nLqrHWHGnt/mJ5hWMQM=`,
    );

  const credentials = apple
    .command('credentials')
    .description(
      "DeviceCheck keys per team: attest serve refreshes the receipts of the team's apps with them",
    )
    .addHelpText(
      'after',
      '\nExamples:\n  $ attest apple credentials add ABCDE12345 --key-id KEY1234567 --private-key-file AuthKey_KEY1234567.p8\n  $ attest apple credentials list',
    );

  credentials
    .command('add')
    .description('add (or replace) the DeviceCheck key of a team, sealed under the master key')
    .argument('<team-id>', 'the 10-character Apple team ID (the App ID prefix)')
    .option('--key-id <kid>', "the key's 10-character ID (Apple's Keys page); required")
    .option('--private-key-file <path>', 'the AuthKey_KID.p8 file Apple gave; required')
    .option('--json', 'print {"teamId","keyId","fingerprint","result"}')
    .addHelpText(
      'after',
      '\nExample:\n  $ attest apple credentials add ABCDE12345 --key-id KEY1234567 --private-key-file AuthKey_KEY1234567.p8',
    )
    .action(
      async (
        teamId: string,
        opts: { keyId?: string; privateKeyFile?: string; json?: boolean },
        command: Command,
      ) => {
        // imported here, as below: they load the database layer and the receipt verifier
        const { APPLE_KEY_ID, APPLE_TEAM_ID, parseDeviceCheckKey } =
          await import('../../db/appleCredentials.js');
        if (!APPLE_TEAM_ID.test(teamId))
          throw usageError(`"${teamId}" is not a team ID: 10 uppercase letters or digits`);
        if (opts.keyId === undefined)
          throw usageError("required option '--key-id <kid>' not specified");
        if (!APPLE_KEY_ID.test(opts.keyId))
          throw usageError(
            `--key-id "${opts.keyId}" is not a key ID: 10 uppercase letters or digits`,
          );
        if (opts.privateKeyFile === undefined)
          throw usageError("required option '--private-key-file <path>' not specified");
        const text = readCliFileSync(opts.privateKeyFile, {
          maxBytes: 16_384,
          what: '--private-key-file',
        }).toString('utf8');
        try {
          parseDeviceCheckKey(text);
        } catch (err) {
          throw usageError(`${opts.privateKeyFile}: ${(err as Error).message}`);
        }
        const auditor = auditorFor(command);
        const keyId = opts.keyId;
        await withAdmin(
          async (admin) => {
            const { result, fingerprint } = await admin.run('apple.credentials.add', {
              teamId,
              keyId,
              privateKeyPem: text,
            });
            if (opts.json) printJson({ teamId, keyId, fingerprint, result });
            else
              process.stdout.write(
                `${result} DeviceCheck key ${keyId} for team ${teamId} (fingerprint ${fingerprint}): stored, sealed; Apple has not been asked yet (attest serve uses it at its next receipt refresh; "attest status --check" asks Apple now)\n`,
              );
          },
          { auditor },
        );
      },
    );

  credentials
    .command('list')
    .description('list the teams with a DeviceCheck key (fingerprints only, never the key)')
    .option('--json', 'print the list as JSON')
    .addHelpText('after', '\nExample:\n  $ attest apple credentials list --json')
    .action(async (opts: { json?: boolean }) => {
      await withAdmin(async (admin) => {
        const list = await admin.run('apple.credentials.list', {});
        if (opts.json) {
          printJson(
            list.map((c) => ({
              ...c,
              createdAt: c.createdAt.toISOString(),
              rejectedAt: c.rejectedAt?.toISOString() ?? null,
            })),
          );
          return;
        }
        printTable(
          ['TEAM', 'KEY ID', 'FINGERPRINT', 'ADDED', 'STATUS'],
          list.map((c) => [
            c.teamId,
            c.keyId,
            c.fingerprint,
            c.createdAt.toISOString(),
            // a key Apple never refused may still be one it was never asked about
            c.rejectedAt
              ? `refused by Apple since ${c.rejectedAt.toISOString()}`
              : 'not refused by Apple',
          ]),
        );
      });
    });

  credentials
    .command('remove')
    .description("remove a team's DeviceCheck key: its receipts are no longer refreshed")
    .argument('<team-id>', 'the team ID')
    .option('--yes', 'do not ask (needed without a terminal)')
    .option('--json', 'print {"teamId","removed"}')
    .addHelpText('after', '\nExample:\n  $ attest apple credentials remove ABCDE12345 --yes')
    .action(async (teamId: string, opts: { yes?: boolean; json?: boolean }, command: Command) => {
      const { APPLE_TEAM_ID } = await import('../../db/appleCredentials.js');
      if (!APPLE_TEAM_ID.test(teamId))
        throw usageError(`"${teamId}" is not a team ID: 10 uppercase letters or digits`);
      requireConfirmation('apple credentials remove', opts.yes);
      const auditor = auditorFor(command);
      await withAdmin(
        async (admin) => {
          await confirm(
            [
              `This removes the DeviceCheck key of team ${teamId}: its receipts stop being refreshed.`,
            ],
            opts.yes,
          );
          const { removed } = await admin.run('apple.credentials.remove', { teamId });
          if (!removed) throw negativeError(`team ${teamId} has no DeviceCheck key`);
          if (opts.json) printJson({ teamId, removed });
          else process.stdout.write(`removed the DeviceCheck key of team ${teamId}\n`);
        },
        { auditor },
      );
    });

  const receipts = apple
    .command('receipts')
    .description('App Attest receipts stored with keys')
    .addHelpText(
      'after',
      '\nExample:\n  $ attest apple receipts show 2o0syRGn1HDKDv85d522XBC9nLqrHWHGnt/mJ5hWMQM=',
    );
  receipts
    .command('show')
    .description("a key's receipt facts: type, times, risk metric, refresh state")
    .argument('<key-id>', 'the key id, base64 (as appleTokenDetails.keyIdentifier shows it)')
    .option('--json', 'print the facts as JSON')
    .addHelpText(
      'after',
      '\nExample:\n  $ attest apple receipts show 2o0syRGn1HDKDv85d522XBC9nLqrHWHGnt/mJ5hWMQM= --json',
    )
    .action(async (keyIdText: string, opts: { json?: boolean }) => {
      const { readReceiptFacts } = await import('../../core/apple/verifyReceipt.js');
      const keyId = decodeBase64(keyIdText.trim());
      if (!keyId || keyId.length !== 32)
        throw usageError(`"${keyIdText}" is not a key id: base64 of 32 bytes`);
      await withAdmin(async (admin) => {
        const view = await admin.run('apple.receipts.show', { keyId });
        if (!view) throw negativeError(`no App Attest key ${keyIdText} is registered`);
        const facts = view.receipt ? readReceiptFacts(view.receipt) : null;
        const doc = {
          keyId: keyIdText,
          appId: view.appId,
          environment: view.environment,
          receipt: view.receipt
            ? {
                valid: view.problem === null,
                type: view.type,
                creationTime: view.creationTime?.toISOString() ?? null,
                notBefore: view.notBefore?.toISOString() ?? null,
                expirationTime: view.expirationTime?.toISOString() ?? null,
                riskMetric: view.riskMetric,
                environment: facts?.environment ?? null,
                problem: view.problem,
                bytes: view.receipt.length,
              }
            : null,
          refresh: {
            refreshable: view.refreshable && view.receipt !== null && view.problem === null,
            refreshedAt: view.refreshedAt?.toISOString() ?? null,
            nextAttemptAt: view.nextAttemptAt?.toISOString() ?? null,
            lastOutcome: view.lastOutcome,
            failures: view.failures,
          },
          validationCategory: view.validationCategory,
          bundleVersion: view.bundleVersion,
          lastUsedAt: view.lastUsedAt?.toISOString() ?? null,
        };
        if (opts.json) {
          printJson(doc);
          return;
        }
        const r = doc.receipt;
        const lines = [
          `key ${keyIdText}: ${view.appId} (${view.environment})`,
          r
            ? `receipt: ${r.valid ? 'valid' : `INVALID (${r.problem})`}, ${r.type ?? '?'}, created ${r.creationTime ?? '?'}, expires ${r.expirationTime ?? '?'}${r.notBefore ? `, refreshable from ${r.notBefore}` : ''}`
            : 'receipt: none (the attestation carried none)',
          `risk metric: ${view.riskMetric ?? 'not known yet (no refreshed receipt)'}`,
          `refresh: ${doc.refresh.refreshable ? `next ${doc.refresh.nextAttemptAt ?? '-'}` : 'not refreshable'}, last ${doc.refresh.lastOutcome ?? 'never tried'}${doc.refresh.refreshedAt ? ` (refreshed ${doc.refresh.refreshedAt})` : ''}${doc.refresh.failures ? `, ${doc.refresh.failures} failure(s) in a row` : ''}`,
          `distribution: ${view.validationCategory ?? 'not reported'}${view.bundleVersion ? `, bundle version ${view.bundleVersion}` : ''}`,
        ];
        process.stdout.write(`${lines.map(safeText).join('\n')}\n`);
      });
    });

  return apple;
}
