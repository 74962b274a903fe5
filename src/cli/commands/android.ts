import { Command } from 'commander';
import {
  parseRevocationDocument,
  revocationDocument,
} from '../../core/androidKey/revocationList.js';
import { auditorFor, withAdmin } from '../context.js';
import { usageError } from '../errors.js';
import { readCliFileSync } from '../inputFiles.js';
import { printJson } from '../output.js';
import { safeText } from '../terminalText.js';

/** Google's list is about 1 MB today; room to grow, a bound on what is read. */
const STATUS_LIST_MAX_BYTES = 16 * 1024 * 1024;

/** `attest android`: the Android key attestation status list. */
export function androidCommand(): Command {
  const android = new Command('android')
    .description('Android hardware key attestation (android-key): the attestation status list')
    .addHelpText(
      'after',
      '\nExamples:\n  $ attest android revocations show\n  $ attest android revocations update status.json',
    );
  const revocations = android
    .command('revocations')
    .description("Google's attestation status list, kept in the database for every instance")
    .addHelpText(
      'after',
      '\nExamples:\n  $ attest android revocations show --json\n  $ attest android revocations update status.json',
    );

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
    .action(async (file: string, opts: { takenAt?: string; json?: boolean }, command: Command) => {
      const text = readCliFileSync(file, {
        maxBytes: STATUS_LIST_MAX_BYTES,
        what: 'the status list',
      }).toString('utf8');
      let entries;
      try {
        ({ entries } = parseRevocationDocument(JSON.parse(text)));
      } catch (err) {
        throw usageError(
          `${safeText(file)} is not Google's attestation status list: ${err instanceof SyntaxError ? 'not JSON' : (err as Error).message}`,
        );
      }
      const takenAt = opts.takenAt === undefined ? new Date() : new Date(opts.takenAt);
      if (Number.isNaN(takenAt.getTime()))
        throw usageError(`--taken-at takes an ISO 8601 time, got "${opts.takenAt}"`);
      const auditor = auditorFor(command);
      const { stored } = await withAdmin(
        (admin) =>
          admin.run('android.revocations.update', {
            // the entries as parsed (what is stored), not the file's other fields
            document: revocationDocument(entries),
            source: `file ${file}`.slice(0, 1100),
            takenAt,
          }),
        { auditor },
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
    .addHelpText('after', '\nExample:\n  $ attest android revocations show --json')
    .action(async (opts: { json?: boolean }) => {
      const info = await withAdmin((admin) => admin.run('android.revocations.show', {}));
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
            ? `${view.entries} entries from ${safeText(view.source)}, taken ${view.takenAt}, stored ${view.updatedAt}\n`
            : 'no status list stored yet ("attest serve" stores the built-in snapshot)\n',
        );
    });
  return android;
}
