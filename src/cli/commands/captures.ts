import { Command } from 'commander';
import { encodeBase64 } from '../../core/base64.js';
import { REJECT_REASONS } from '../../core/rejectReasons.js';
import { CAPTURE_PAGE } from '../../admin/captureOperations.js';
import { CAPTURE_ID } from '../../db/captures.js';
import { durationProblem, parseDuration } from '../../core/duration.js';
import { auditorFor, withAdmin } from '../context.js';
import { CliError, EXIT, usageError } from '../errors.js';
import { isoInstant } from '../isoInstant.js';
import { printJson, printTable, when } from '../output.js';

interface ListFlags {
  reason?: string;
  app?: string;
  since?: string;
  mode: string;
  limit: string;
  json?: boolean;
}

/** A capture id flag or argument, or a usage error (exit 2). */
export function captureId(text: string): string {
  const id = text.trim();
  if (!CAPTURE_ID.test(id))
    throw usageError(`"${text}" is not a capture id: 16 hex digits, as captures list shows them`);
  return id;
}

/** `--since`: a duration back from now (30m, 24h, 7d) or an ISO 8601 time. */
function sinceOf(text: string, now: Date): Date {
  const seconds = parseDuration(text);
  if (seconds !== null) return new Date(now.getTime() - seconds * 1000);
  if (/^\d{4}-/.test(text)) return isoInstant(text, '--since', '2026-11-27T09:00:00Z');
  if (/^\s*\d+\s*$/.test(text)) throw usageError(durationProblem('--since', text));
  throw usageError(
    `--since takes a duration back from now (30m, 24h, 7d) or an ISO 8601 time, got "${text}"`,
  );
}

/**
 * `attest captures`: the tokens `serve` kept for replay (ATTEST_CAPTURE), for security staff.
 * Read through the admin socket or the database, never the RP API; each token read is audited.
 */
export function capturesCommand(): Command {
  const captures = new Command('captures')
    .description(
      'tokens serve kept for replay (ATTEST_CAPTURE): list them, get one, verify-file --capture ID',
    )
    .addHelpText(
      'after',
      `
Kept only while ATTEST_CAPTURE is rejected or all (docs/staff-tools.md). Each token read
(captures get, verify-file --capture) is an audit event, capture.read.

Examples:
  $ attest captures list --reason apple_key_unknown --since 24h
  $ attest captures get 3f9c0a1b2c3d4e5f > token.cbor
  $ attest verify-file --capture 3f9c0a1b2c3d4e5f`,
    );

  captures
    .command('list')
    .description('captures newest first, without their tokens')
    .option('--reason <reason>', 'only rejections for this reason (none: accepted verifies)')
    .option('--app <id>', 'only this App Attest app ID or Android package')
    .option('--since <when>', 'a duration back from now (30m, 24h, 7d) or an ISO 8601 time')
    .option('--mode <mode>', "whose verifies: live (the default) or test (test API keys')", 'live')
    .option('--limit <n>', `at most this many, 1 to ${CAPTURE_PAGE}`, '100')
    .option('--json', 'print the list as JSON')
    .addHelpText(
      'after',
      '\nExample:\n  $ attest captures list --reason nonce_mismatch --app com.example.app --json',
    )
    .action(async (flags: ListFlags) => {
      const now = new Date();
      if (flags.reason !== undefined && flags.reason !== 'none')
        if (!(REJECT_REASONS as readonly string[]).includes(flags.reason))
          throw usageError(
            `--reason takes a rejection reason (docs/checks.md) or none, got "${flags.reason}"`,
          );
      if (flags.mode !== 'live' && flags.mode !== 'test')
        throw usageError(`--mode takes live or test, got "${flags.mode}"`);
      const limit = /^\d{1,5}$/.test(flags.limit) ? Number(flags.limit) : 0;
      if (limit < 1 || limit > CAPTURE_PAGE)
        throw usageError(
          `--limit takes a whole number from 1 to ${CAPTURE_PAGE}, got "${flags.limit}"`,
        );
      if (flags.app !== undefined && (flags.app.length === 0 || flags.app.length > 256))
        throw usageError('--app takes an App Attest app ID or an Android package');
      const since = flags.since === undefined ? undefined : sinceOf(flags.since, now);
      if (since && since.getTime() > now.getTime()) throw usageError('--since is in the future');
      await withAdmin(async (admin) => {
        const rows = await admin.run('captures.list', {
          mode: flags.mode as 'live' | 'test',
          limit,
          ...(flags.reason !== undefined ? { reason: flags.reason } : {}),
          ...(flags.app !== undefined ? { app: flags.app } : {}),
          ...(since ? { since } : {}),
        });
        if (flags.json) {
          printJson(
            rows.map((r) => ({
              ...r,
              verifiedAt: r.verifiedAt.toISOString(),
              verdict: r.valid ? 'accepted' : 'rejected',
            })),
          );
          return;
        }
        if (rows.length === 0) {
          process.stdout.write(`no ${flags.mode} captures match\n`);
          return;
        }
        printTable(
          ['ID', 'VERIFIED AT', 'KEY', 'SERVICE', 'APP', 'VERDICT', 'BYTES'],
          rows.map((r) => [
            r.id,
            when(r.verifiedAt),
            r.apiKeyId,
            r.service ?? '-',
            r.app ?? '-',
            r.valid ? 'accepted' : `rejected: ${r.reason}`,
            String(r.tokenBytes),
          ]),
        );
      });
    });

  captures
    .command('get')
    .description("a capture's token as the RP sent it: raw CBOR on stdout (redirect it to a file)")
    .argument('<id>', 'the capture id (captures list)')
    .option('--base64', 'print the token as one line of base64 instead of raw bytes')
    .addHelpText(
      'after',
      '\nExamples:\n  $ attest captures get 3f9c0a1b2c3d4e5f > token.cbor\n  $ attest captures get 3f9c0a1b2c3d4e5f --base64',
    )
    .action(async (idText: string, flags: { base64?: boolean }, command: Command) => {
      const id = captureId(idText);
      if (!flags.base64 && process.stdout.isTTY)
        throw usageError(
          'the token is raw CBOR: redirect it (captures get ID > token.cbor) or give --base64',
        );
      await withAdmin(
        async (admin) => {
          const capture = await admin.run('captures.read', { id, purpose: 'get' });
          if (!capture)
            throw new CliError(`no capture ${id} (pruned, or never kept)`, EXIT.negative);
          process.stdout.write(
            flags.base64 ? `${encodeBase64(capture.token)}\n` : Buffer.from(capture.token),
          );
        },
        { auditor: auditorFor(command), establish: false },
      );
    });

  return captures;
}
