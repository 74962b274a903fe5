import { setTimeout as sleep } from 'node:timers/promises';
import { Command } from 'commander';
import {
  CHAIN_START,
  checkHead,
  checkLink,
  parseAnchor,
  type ChainBreak,
  type ChainedEvent,
  type ChainPoint,
} from '../../core/auditChain.js';
import { AUDIT_PAGE, type AuditEvent, type AuditSummary } from '../../db/audit.js';
import type { Admin } from '../admin.js';
import { withAdmin } from '../context.js';
import { durationProblem, parseDuration } from '../../core/duration.js';
import { negativeError, usageError } from '../errors.js';
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

  audit
    .command('verify')
    .description(
      'walk the hash chain and name the first broken link (an edited, deleted or moved event): exit 1',
    )
    .option(
      '--anchor <seq:hash>',
      'also check that event SEQ still has HASH, as printed by an earlier "attest audit head"',
    )
    .option('--json', 'print the result as JSON')
    .addHelpText(
      'after',
      `
Checks every event's place, its link to the event before and its content, then the chain's head.
Someone who can rewrite the whole table can also rewrite the whole chain: anchor "attest audit
head" somewhere else (a ticket, a SIEM) and pass it back with --anchor.

Examples:
  $ attest audit verify
  $ attest audit verify --anchor 42:3f0c...`,
    )
    .action(async (opts: { anchor?: string; json?: boolean }) => {
      const anchor = opts.anchor === undefined ? undefined : parseAnchor(opts.anchor);
      if (anchor === null)
        throw usageError(
          `--anchor takes SEQ:HASH as "attest audit head" prints it (42:<64 hex digits>), got "${opts.anchor}"`,
        );
      await withAdmin(async (admin) => {
        const result = await verifyChain(admin, anchor);
        if (opts.json) printJson(result);
        if (result.broken) {
          if (opts.json) {
            process.exitCode = 1;
            return;
          }
          throw negativeError(
            `audit chain broken at event ${result.broken.seq}: ${result.broken.problem}`,
          );
        }
        if (!opts.json)
          process.stdout.write(
            result.events === 0
              ? 'audit chain intact: no events yet\n'
              : `audit chain intact: ${result.events} events, head ${result.head.seq}:${result.head.hash}${anchor ? `, anchor ${anchor.seq} matches` : ''}\n`,
          );
      });
    });

  audit
    .command('head')
    .description("print the last event's place and hash (SEQ:HASH), to keep somewhere else")
    .option('--json', 'print it as JSON')
    .addHelpText(
      'after',
      `
Someone who can rewrite the table can rewrite the chain too: keep the head where they cannot
(a ticket, the SIEM), and check it later with "attest audit verify --anchor SEQ:HASH".

Examples:
  $ attest audit head
  $ attest audit verify --anchor "$(attest audit head)"`,
    )
    .action(async (opts: { json?: boolean }) => {
      await withAdmin(async (admin) => {
        const head = await admin.run('audit.head', {});
        if (opts.json) printJson(head);
        else process.stdout.write(`${head.seq}:${head.hash}\n`);
      });
    });

  audit
    .command('export')
    .description('write events as NDJSON, one CloudEvents envelope a line, for a SIEM')
    .option('--since <duration>', 'only the last 30m, 24h, 7d... (database clock)')
    .option('--after <seq>', 'only events after this place (resume where an export stopped)')
    .option('--follow', 'keep writing new events as they are recorded (polls once a second)')
    .addHelpText(
      'after',
      `
Each line: {"specversion":"1.0","type":"dev.attest.audit.<action>","source":"attest/audit",
"id":"<seq>","time":...,"subject":"<target>","datacontenttype":"application/json","data":{...}}
with the event, its seq, prevHash and hash in data. A closed pipe ends the export (exit 0).

Examples:
  $ attest audit export --since 7d > audit.ndjson
  $ attest audit export --follow --after 1200 | vector --config siem.toml`,
    )
    .action(async (opts: { since?: string; after?: string; follow?: boolean }) => {
      const sinceSeconds = opts.since === undefined ? undefined : parseDuration(opts.since);
      if (sinceSeconds === null) throw usageError(durationProblem('--since', opts.since!));
      let afterSeq = 0;
      if (opts.after !== undefined) {
        if (!/^(0|[1-9][0-9]{0,15})$/.test(opts.after))
          throw usageError(`--after takes an event's place (a whole number), got "${opts.after}"`);
        afterSeq = Number(opts.after);
      }
      await withAdmin(async (admin) => {
        for (;;) {
          const page = await admin.run('audit.chain', {
            afterSeq,
            limit: AUDIT_PAGE,
            ...(sinceSeconds !== undefined ? { sinceSeconds } : {}),
          });
          for (const event of page) await writeLine(JSON.stringify(cloudEvent(event)));
          if (page.length > 0) afterSeq = page[page.length - 1]!.seq;
          if (page.length === AUDIT_PAGE) continue;
          if (!opts.follow) return;
          await sleep(1000);
        }
      });
    });

  return audit;
}

/** What `audit verify` found: the events read, the head, and the first break if any. */
export interface ChainReport {
  events: number;
  head: ChainPoint;
  broken: ChainBreak | null;
}

/** Reads the chain page by page and checks every link, the head, and the anchor if given. */
export async function verifyChain(
  admin: Admin,
  anchor: ChainPoint | undefined,
): Promise<ChainReport> {
  // read first: events recorded during the walk put the head behind the last event, never ahead
  const head = await admin.run('audit.head', {});
  let last = CHAIN_START;
  let events = 0;
  const seen: { head?: string; anchor?: string } = {};
  const report = (broken: ChainBreak | null): ChainReport => ({ events, head: last, broken });
  for (;;) {
    const page = await admin.run('audit.chain', { afterSeq: last.seq, limit: AUDIT_PAGE });
    for (const event of page) {
      const broken = checkLink(last, event);
      if (broken) return report(broken);
      if (event.seq === head.seq) seen.head = event.hash;
      if (event.seq === anchor?.seq) seen.anchor = event.hash;
      last = { seq: event.seq, hash: event.hash };
      events++;
    }
    if (page.length < AUDIT_PAGE) break;
  }
  if (head.seq >= last.seq) {
    const broken = checkHead(last, head);
    if (broken) return report(broken);
  } else if (seen.head !== head.hash) {
    return report(checkHead({ seq: head.seq, hash: seen.head ?? '' }, head));
  }
  if (anchor && seen.anchor !== anchor.hash)
    return report({
      seq: anchor.seq,
      problem:
        seen.anchor === undefined
          ? `the anchored event is gone: the chain ends at event ${last.seq}`
          : `its hash ${seen.anchor.slice(0, 16)}… is not the anchor's ${anchor.hash.slice(0, 16)}…: the chain was rewritten from here or before`,
    });
  return report(null);
}

/** An event in a CloudEvents 1.0 JSON envelope. */
function cloudEvent(event: ChainedEvent) {
  return {
    specversion: '1.0',
    type: `dev.attest.audit.${event.action}`,
    source: 'attest/audit',
    id: String(event.seq),
    time: event.at,
    subject: event.target,
    datacontenttype: 'application/json',
    data: event,
  };
}

/** One line on stdout, waiting for the reader when the pipe is full. */
async function writeLine(line: string): Promise<void> {
  if (!process.stdout.write(`${line}\n`))
    await new Promise<void>((resolve) => process.stdout.once('drain', resolve));
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
