import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Command } from 'commander';
import { ConfigError } from '../../config.js';
import { BackupRefusedError, DEFAULT_MAX_UNPACKED_BYTES } from '../../db/backupArchive.js';
import { PG_DIR, PGLITE_DIR } from '../../db/embeddedServer.js';
import { restoreEmbedded, RestoreBusyError } from '../../db/embeddedRestore.js';
import { readMasterKeyFile, rotateDefaultKeyFile } from '../../db/masterKey.js';
import { runMigrations } from '../../db/migrate.js';
import { createSecretBox, type MasterKey } from '../../db/secretBox.js';
import { checkMasterKey, rotateMasterKey } from '../../db/secrets.js';
import {
  auditorFor,
  config,
  loadSecrets,
  runningServer,
  secretsError,
  withAdmin,
  withDatabase,
} from '../context.js';
import { durationProblem, parseDuration } from '../../core/duration.js';
import { CliError, runtimeError, usageError } from '../errors.js';
import { openCliFileStream } from '../inputFiles.js';

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
      if (runningServer()) {
        // the running server migrated when it started: only it may open the database
        const pending = await withAdmin(
          async (admin) => (await admin.run('db.status', {})).filter((m) => !m.applied).length,
          { requireMigrated: false },
        );
        if (pending > 0)
          throw runtimeError(
            `${pending} migration(s) are pending but a running "attest serve" holds ${config().dataDir}: stop it, then run "attest db migrate" (or start the new "attest serve", which migrates first)`,
          );
        if (opts.json) printJson({ applied: 0, sealed: 0 });
        else
          process.stdout.write(`${config().dataDir} is up to date (through the running server)\n`);
        return;
      }
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
            await checkMasterKey(handle.db, box, { source: masterKey.source });
          } catch (err) {
            if (err instanceof RestoreBusyError) throw runtimeError(err.message);
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
      await withAdmin(
        async (admin) => {
          const list = await admin.run('db.status', {});
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
      if (runningServer())
        throw runtimeError(
          `a running "attest serve" holds ${config().dataDir} with the current master key: stop it, rotate, then start it again`,
        );
      await withDatabase(async (handle) => {
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
      await withAdmin(async (admin) => {
        const { deleted } = await admin.run('db.prune', { olderThanSeconds: seconds });
        if (opts.json) printJson({ deleted });
        else process.stdout.write(`deleted ${deleted} session(s)\n`);
      });
    });

  db.command('backup')
    .description(
      'write a consistent snapshot of the embedded database to a new file (through the running server when there is one)',
    )
    .argument('<file>', 'the backup file to create (0600; an existing file is never replaced)')
    .option('--json', 'print {"file","bytes"}')
    .addHelpText(
      'after',
      `
The snapshot is PostgreSQL's online base backup of the embedded server (a gzipped tar of its
data directory with the WAL that makes it consistent), taken while requests go on: API keys,
allowlist, registered App Attest keys, sessions, audit trail.
It holds the secrets sealed, never the master key: keep the master key (ATTEST_MASTER_KEY_FILE,
or the data dir's master.key) in another place than the backups. On PostgreSQL use pg_dump.

Example:
  $ attest db backup /var/backups/attest-$(date +%F).tgz`,
    )
    .action(async (file: string, opts: { json?: boolean }) => {
      if (config().databaseUrl)
        throw usageError(
          'attest db backup is for the embedded database; on PostgreSQL use pg_dump (pg_dump -Fc "$DATABASE_URL" > attest.dump)',
        );
      if (existsSync(file)) throw usageError(`${file} exists: give a new file name`);
      await withAdmin(
        async (admin) => {
          const bytes = await admin.backup!(file);
          if (opts.json) printJson({ file, bytes });
          else
            process.stdout.write(
              `backed up ${admin.where} to ${file} (${bytes} bytes); the master key is not in it: keep it apart from the backups\n`,
            );
        },
        { requireMigrated: false },
      );
    });

  db.command('restore')
    .description('create the embedded database from a backup, in a data dir that has none')
    .argument('<file>', 'a file made by "attest db backup"')
    .option(
      '--max-unpacked <MiB>',
      `the most the backup may unpack to, in MiB (default ${DEFAULT_MAX_UNPACKED_BYTES / 1024 ** 2})`,
    )
    .option('--json', 'print {"dataDir"}')
    .addHelpText(
      'after',
      `
Refused over a data dir that holds a database (restore into a new ATTEST_DATA_DIR, then swap the
folders while attest is stopped). The secrets in the backup stay sealed with the master key of the
deployment it came from: start attest with that key (ATTEST_MASTER_KEY_FILE, or its master.key
copied into the data dir). On PostgreSQL use pg_restore.

Example:
  $ ATTEST_DATA_DIR=/srv/attest-restored attest db restore /var/backups/attest-2026-01-23.tgz`,
    )
    .action(async (file: string, opts: { json?: boolean; maxUnpacked?: string }) => {
      const cfg = config();
      if (cfg.databaseUrl)
        throw usageError(
          'attest db restore is for the embedded database; on PostgreSQL use pg_restore (pg_restore -d "$DATABASE_URL" attest.dump)',
        );
      const dataDir = resolve(cfg.dataDir);
      if (
        runningServer(cfg) ||
        existsSync(join(dataDir, PG_DIR)) ||
        existsSync(join(dataDir, PGLITE_DIR))
      )
        throw usageError(
          `${dataDir} already holds a database: restore into a data dir without one (set ATTEST_DATA_DIR to a new folder)`,
        );
      const maxBytes = unpackedLimit(opts.maxUnpacked);
      // a regular file, read as it streams (never whole): the unpacking counts and stops; the
      // archive itself is at most what it may unpack to, plus gzip's overhead on data it cannot shrink
      const backup = openCliFileStream(file, {
        what: 'db restore',
        maxBytes: maxBytes + Math.ceil(maxBytes / 64),
      });
      try {
        await restoreEmbedded(dataDir, backup, { maxBytes });
      } catch (err) {
        if (err instanceof RestoreBusyError) throw runtimeError(err.message);
        if (err instanceof BackupRefusedError)
          throw usageError(
            `${file} is not a backup made by "attest db backup": ${err.message}; nothing was restored`,
          );
        throw err;
      } finally {
        backup.destroy();
      }
      if (opts.json) printJson({ dataDir });
      else
        process.stdout.write(
          `restored ${file} into ${dataDir}; start attest there with the master key of the deployment it came from\n`,
        );
    });

  return db;
}

/** `--max-unpacked` in bytes: a whole number of MiB, at least 1. */
function unpackedLimit(value: string | undefined): number {
  if (value === undefined) return DEFAULT_MAX_UNPACKED_BYTES;
  if (!/^[1-9][0-9]{0,6}$/.test(value))
    throw usageError(`--max-unpacked takes a whole number of MiB, not ${JSON.stringify(value)}`);
  return Number(value) * 1024 ** 2;
}
