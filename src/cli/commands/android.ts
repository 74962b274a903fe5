import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { parseRevocationDocument } from '../../core/android/revocationList.js';
import { createRevocationRepository } from '../../db/androidRevocations.js';
import { withDatabase } from '../context.js';
import { usageError } from '../errors.js';
import { printJson } from '../output.js';

/** `attest android`: the Android key attestation status list. */
export function androidCommand(): Command {
  const android = new Command('android').description(
    'Android hardware key attestation (android-key): the attestation status list',
  );
  const revocations = android
    .command('revocations')
    .description("Google's attestation status list, kept in the database for every instance");

  revocations
    .command('update')
    .description(
      'replace the stored status list with a file (for deployments that cannot reach Google)',
    )
    .argument('<file>', 'the JSON from https://android.googleapis.com/attestation/status')
    .option('--taken-at <iso-time>', 'when the list was downloaded (default: the file time, now)')
    .option('--json', 'print {"entries","stored"}')
    .addHelpText(
      'after',
      `
Example:
  $ curl -o status.json https://android.googleapis.com/attestation/status
  $ attest android revocations update status.json`,
    )
    .action(async (file: string, opts: { takenAt?: string; json?: boolean }) => {
      let text: string;
      try {
        text = readFileSync(file, 'utf8');
      } catch (err) {
        throw usageError(`cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
      }
      let entries;
      try {
        ({ entries } = parseRevocationDocument(JSON.parse(text)));
      } catch (err) {
        throw usageError(
          `${file} is not Google's attestation status list: ${err instanceof SyntaxError ? 'not JSON' : (err as Error).message}`,
        );
      }
      const takenAt = opts.takenAt === undefined ? new Date() : new Date(opts.takenAt);
      if (Number.isNaN(takenAt.getTime()))
        throw usageError(`--taken-at takes an ISO 8601 time, got "${opts.takenAt}"`);
      const stored = await withDatabase((handle) =>
        createRevocationRepository(handle.db).replace(entries, `file ${file}`, takenAt),
      );
      if (opts.json) printJson({ entries: entries.size, stored });
      else
        process.stdout.write(
          stored
            ? `stored ${entries.size} status list entries (taken ${takenAt.toISOString()})\n`
            : `not stored: the database holds a list taken after ${takenAt.toISOString()}\n`,
        );
    });

  revocations
    .command('show')
    .description('where the stored status list came from, when, and how many entries it has')
    .option('--json', 'print {"source","takenAt","updatedAt","entries"}')
    .action(async (opts: { json?: boolean }) => {
      const info = await withDatabase((handle) => createRevocationRepository(handle.db).info());
      const view = info
        ? {
            source: info.source,
            takenAt: info.takenAt.toISOString(),
            updatedAt: info.updatedAt.toISOString(),
            entries: info.entryCount,
          }
        : null;
      if (opts.json) printJson(view);
      else
        process.stdout.write(
          view
            ? `${view.entries} entries from ${view.source}, taken ${view.takenAt}, stored ${view.updatedAt}\n`
            : 'no status list stored yet ("attest serve" stores the built-in snapshot)\n',
        );
    });
  return android;
}
