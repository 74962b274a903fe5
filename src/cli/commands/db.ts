import { Command } from 'commander';
import { ConfigError } from '../../config.js';
import { DatabaseBusyError } from '../../db/client.js';
import { readMasterKeyFile, rotateDefaultKeyFile } from '../../db/masterKey.js';
import { migrationStatus, runMigrations } from '../../db/migrate.js';
import { createSecretBox, type MasterKey } from '../../db/secretBox.js';
import { checkMasterKey, rotateMasterKey } from '../../db/secrets.js';
import { createSessionRepository } from '../../db/sessions.js';
import { auditorFor, loadSecrets, secretsError, withDatabase } from '../context.js';
import { durationProblem, parseDuration } from '../duration.js';
import { runtimeError, usageError } from '../errors.js';
import { printJson, printTable } from '../output.js';

export function dbCommand(): Command {
  const db = new Command('db')
    .description('database migrations and housekeeping')
    .addHelpText(
      'after',
      '\nExamples:\n  $ attest db migrate\n  $ attest db status --json\n  $ attest db prune --older-than 24h',
    );

  db.command('migrate')
    .description('apply pending migrations (safe when several instances run it at once)')
    .option('--json', 'print the result as JSON')
    .addHelpText(
      'after',
      '\nExample:\n  $ DATABASE_URL=postgres://attest@db/attest attest db migrate',
    )
    .action(async (opts: { json?: boolean }) => {
      await withDatabase(
        async (handle) => {
          // the migration path seals secrets still in clear, so it needs the master key
          const { box, masterKey } = await loadSecrets(handle, { check: false });
          let applied: number;
          let sealed: number;
          try {
            ({ applied, sealed } = await runMigrations(handle, {
              onProgress: (message) => process.stderr.write(`${message}\n`),
              secrets: { box, source: masterKey.source },
            }));
            // through a running server's socket the migration step is skipped: still refuse a wrong key
            await checkMasterKey(handle.db, box, { source: masterKey.source });
          } catch (err) {
            if (err instanceof DatabaseBusyError) throw runtimeError(err.message);
            throw secretsError(err);
          }
          if (opts.json) printJson({ applied, sealed });
          else {
            process.stdout.write(
              applied
                ? `applied ${applied} migration(s) to ${handle.where}\n`
                : `${handle.where} is up to date\n`,
            );
            if (sealed)
              process.stdout.write(
                `sealed ${sealed} row(s) of secrets under master key ${box.keyId}\n`,
              );
          }
        },
        {
          requireMigrated: false,
          create: true,
          onProgress: (message) => process.stderr.write(`${message}\n`),
        },
      );
    });

  db.command('status')
    .description('list the shipped migrations and whether each is applied')
    .option('--json', 'print the list as JSON')
    .addHelpText('after', '\nExample:\n  $ attest db status --json')
    .action(async (opts: { json?: boolean }) => {
      await withDatabase(
        async (handle) => {
          const list = await migrationStatus(handle.db);
          if (opts.json) printJson(list);
          else
            printTable(
              ['MIGRATION', 'APPLIED'],
              list.map((m) => [m.name, m.applied ? 'yes' : 'no']),
            );
        },
        { requireMigrated: false },
      );
    });

  db.command('rotate-master-key')
    .description('re-encrypt every stored secret under a new master key, in one transaction')
    .requiredOption(
      '--new-key-file <path>',
      'the new master key: 32 random bytes in base64 (openssl rand -base64 32 > new.key)',
    )
    .option('--json', 'print the result as JSON')
    .addHelpText(
      'after',
      `
The current key is the configured one (ATTEST_MASTER_KEY_FILE, ATTEST_MASTER_KEY, or the embedded
database's own master.key, which is replaced by the new key). Afterwards only the new key opens
the secrets: restart every instance with it. The old key file is left for you to delete.

Example:
  $ openssl rand -base64 32 > /etc/attest/master-2.key
  $ ATTEST_MASTER_KEY_FILE=/etc/attest/master-1.key attest db rotate-master-key --new-key-file /etc/attest/master-2.key`,
    )
    .action(async (opts: { newKeyFile: string; json?: boolean }, command: Command) => {
      const auditor = auditorFor(command);
      let newKey: MasterKey;
      try {
        newKey = readMasterKeyFile(opts.newKeyFile, '--new-key-file');
      } catch (err) {
        if (err instanceof ConfigError) throw usageError(err.message);
        throw err;
      }
      await withDatabase(async (handle) => {
        if (handle.kind === 'embedded-shared') {
          throw runtimeError(
            `a running "attest serve" holds ${handle.where} with the current master key: stop it, rotate, then start it again`,
          );
        }
        const { masterKey } = await loadSecrets(handle, { check: false });
        if (masterKey.key.id === newKey.id)
          throw usageError(
            `--new-key-file holds the current master key ${newKey.id}: make a new one with openssl rand -base64 32`,
          );
        const box = createSecretBox([newKey, masterKey.key]);
        const commit = () => rotateMasterKey(handle.db, box, masterKey.source, auditor);
        let result: { rewrapped: number; previousKeyId: string | null };
        let aside: string | undefined;
        try {
          if (masterKey.defaultFile) {
            // the embedded database's own key file changes with it, crash-safe
            ({ result, aside } = await rotateDefaultKeyFile({
              path: masterKey.defaultFile,
              oldKey: masterKey.key,
              newKey,
              db: handle.db,
              commit,
            }));
          } else result = await commit();
        } catch (err) {
          throw secretsError(err);
        }
        if (opts.json) {
          printJson({
            rewrapped: result.rewrapped,
            keyId: newKey.id,
            previousKeyId: masterKey.key.id,
            ...(aside ? { keyFile: masterKey.defaultFile, previousKeyFile: aside } : {}),
          });
          return;
        }
        process.stdout.write(
          `re-encrypted ${result.rewrapped} row(s) of secrets under master key ${newKey.id} (was ${masterKey.key.id})\n`,
        );
        process.stdout.write(
          aside
            ? `${masterKey.defaultFile} now holds the new key; the old one was moved to ${aside}: delete it once no backup needs it\n`
            : `give every instance ATTEST_MASTER_KEY_FILE=${opts.newKeyFile} and restart it; instances still on ${masterKey.key.id} cannot load the Play Integrity keys until then.\n` +
                `the old key (${masterKey.source}) opens nothing in this database now: delete it once no backup needs it\n`,
        );
      });
    });

  db.command('prune')
    .description(
      'delete sessions that expired or were consumed more than --older-than ago (never audit events)',
    )
    .option('--older-than <duration>', 'age such as 30m, 1h, 7d', '1h')
    .option('--json', 'print the result as JSON')
    .addHelpText('after', '\nExample (from cron):\n  $ attest db prune --older-than 24h')
    .action(async (opts: { olderThan: string; json?: boolean }) => {
      const seconds = parseDuration(opts.olderThan);
      if (seconds === null) throw usageError(durationProblem('--older-than', opts.olderThan));
      await withDatabase(async (handle) => {
        const deleted = await createSessionRepository(handle.db).prune(seconds);
        if (opts.json) printJson({ deleted });
        else process.stdout.write(`deleted ${deleted} session(s)\n`);
      });
    });

  return db;
}
