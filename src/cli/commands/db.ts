import { Command } from 'commander';
import { DatabaseBusyError } from '../../db/client.js';
import { migrationStatus, runMigrations } from '../../db/migrate.js';
import { createSessionRepository } from '../../db/sessions.js';
import { withDatabase } from '../context.js';
import { durationProblem, parseDuration } from '../duration.js';
import { runtimeError, usageError } from '../errors.js';
import { printJson, printTable } from '../output.js';

export function dbCommand(): Command {
  const db = new Command('db')
    .description('database migrations and housekeeping')
    .addHelpText('after', '\nExamples:\n  $ attest db migrate\n  $ attest db status --json\n  $ attest db prune --older-than 24h');

  db.command('migrate')
    .description('apply pending migrations (safe when several instances run it at once)')
    .option('--json', 'print the result as JSON')
    .addHelpText('after', '\nExample:\n  $ DATABASE_URL=postgres://attest@db/attest attest db migrate')
    .action(async (opts: { json?: boolean }) => {
      await withDatabase(async (handle) => {
        let applied: number;
        try {
          ({ applied } = await runMigrations(handle, { onProgress: (message) => process.stderr.write(`${message}\n`) }));
        } catch (err) {
          if (err instanceof DatabaseBusyError) throw runtimeError(err.message);
          throw err;
        }
        if (opts.json) printJson({ applied });
        else process.stdout.write(applied ? `applied ${applied} migration(s) to ${handle.where}\n` : `${handle.where} is up to date\n`);
      }, { requireMigrated: false, create: true, onProgress: (message) => process.stderr.write(`${message}\n`) });
    });

  db.command('status')
    .description('list the shipped migrations and whether each is applied')
    .option('--json', 'print the list as JSON')
    .addHelpText('after', '\nExample:\n  $ attest db status --json')
    .action(async (opts: { json?: boolean }) => {
      await withDatabase(async (handle) => {
        const list = await migrationStatus(handle.db);
        if (opts.json) printJson(list);
        else printTable(['MIGRATION', 'APPLIED'], list.map((m) => [m.name, m.applied ? 'yes' : 'no']));
      }, { requireMigrated: false });
    });

  db.command('prune')
    .description('delete sessions that expired or were consumed more than --older-than ago (never audit events)')
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
