import { Command } from 'commander';
import type { AuditEvent, AuditSummary } from '../../db/audit.js';
import { withAdmin } from '../context.js';
import { durationProblem, parseDuration } from '../../duration.js';
import { usageError } from '../errors.js';
import { printJson, printTable, when } from '../output.js';

const ACTION = /^[a-z][a-z0-9_-]*(\.[a-z0-9_-]+)*$/;

export function auditCommand(): Command {
  const audit = new Command('audit')
    .description('the append-only trail of administrative changes (who changed what, when)')
    .addHelpText(
      'after',
      '\nExamples:\n  $ attest audit list --since 24h\n  $ attest audit list --action keys.revoke --json',
    );

  audit
    .command('list')
    .description('list recorded changes, oldest first')
    .option('--since <duration>', 'only the last 30m, 24h, 7d... (database clock)')
    .option(
      '--action <action>',
      'only this action (keys.revoke) or group of actions (keys, allowlist)',
    )
    .option('--json', 'print the events as JSON')
    .addHelpText(
      'after',
      `
Examples:
  $ attest audit list --since 24h
  $ attest audit list --action allowlist --json | jq '.[] | select(.actor == "alice@ops")'`,
    )
    .action(async (opts: { since?: string; action?: string; json?: boolean }) => {
      const sinceSeconds = opts.since === undefined ? undefined : parseDuration(opts.since);
      if (sinceSeconds === null) throw usageError(durationProblem('--since', opts.since!));
      if (opts.action !== undefined && !ACTION.test(opts.action))
        throw usageError(
          `--action takes an action such as keys.revoke or a group such as keys, got "${opts.action}"`,
        );
      await withAdmin(async (admin) => {
        const events = await admin.run('audit.list', {
          ...(sinceSeconds !== undefined ? { sinceSeconds } : {}),
          ...(opts.action !== undefined ? { action: opts.action } : {}),
        });
        if (opts.json) {
          printJson(events);
          return;
        }
        if (events.length === 0) {
          process.stdout.write('no audit events match\n');
          return;
        }
        printTable(
          ['TIME', 'ACTOR', 'ACTION', 'TARGET', 'CHANGE'],
          events.map((e) => [when(e.at), e.actor, e.action, e.target, changeText(e)]),
        );
      });
    });

  return audit;
}

/** One line for a table: the fields that changed, or what was added or removed. */
export function changeText(event: Pick<AuditEvent, 'before' | 'after'>): string {
  const { before, after } = event;
  let text: string;
  if (before && after) {
    const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])];
    text = keys
      .filter((k) => JSON.stringify(before[k]) !== JSON.stringify(after[k]))
      .map((k) => `${k} ${value(before[k])} -> ${value(after[k])}`)
      .join(', ');
  } else if (after) {
    text = fields(after);
  } else if (before) {
    text = `was ${fields(before)}`;
  } else {
    text = '-';
  }
  return text.length > 120 ? `${text.slice(0, 117)}...` : text;
}

function fields(summary: AuditSummary): string {
  return Object.entries(summary)
    .map(([k, v]) => `${k}=${value(v)}`)
    .join(' ');
}

function value(v: unknown): string {
  if (v === null || v === undefined) return '-';
  if (Array.isArray(v)) return v.length ? v.map(value).join(',') : '(none)';
  return typeof v === 'string' ? v : JSON.stringify(v);
}
