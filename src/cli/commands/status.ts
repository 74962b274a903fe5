import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Command } from 'commander';
import { redactUrl } from '../../db/redactUrl.js';
import { lockHolder } from '../../db/runningServer.js';
import { processName } from '../../db/processName.js';
import { androidRevocationUrl } from '../../config.js';
import type { ReceiptRefreshSummary } from '../../db/receiptRefreshQueue.js';
import type { Admin } from '../admin.js';
import { config, withAdmin } from '../context.js';
import { CliError, EXIT } from '../errors.js';
import { printJson } from '../output.js';

/** What `attest status --json` prints. */
export interface StatusReport {
  database: { kind: 'postgres' | 'embedded'; where: string; reachable: boolean; error?: string };
  /** null when there is no database yet (embedded) or it cannot be reached */
  schema: { applied: number; pending: number; state: 'current' | 'pending' } | null;
  /** the master key the database's secrets are sealed with (null: none recorded yet) */
  masterKeyId: string | null;
  /** a server holding this embedded data dir (null: none; PostgreSQL deployments are not tracked) */
  server: { pid: number; process: string; address: string | null } | null;
  /** test API keys accepted by a server started with this configuration (ATTEST_TEST_KEYS) */
  testKeys: 'on' | 'off';
  /**
   * Google's Android attestation status list as stored (null: none yet; `serve` stores the shipped
   * snapshot), its age from when it was taken, and where this configuration's `serve` refreshes
   * it from (null: ATTEST_ANDROID_REVOCATION_URL=off)
   */
  revocationList: {
    source: string;
    takenAt: string;
    updatedAt: string;
    ageSeconds: number;
    entries: number;
    refreshFrom: string | null;
  } | null;
  /** the App Attest receipt refresh schedule (null when the database could not be read) */
  receipts:
    (Omit<ReceiptRefreshSummary, 'lastRefreshedAt'> & { lastRefreshedAt: string | null }) | null;
}

export function statusCommand(): Command {
  return new Command('status')
    .description(
      'what this deployment is: database, schema state, master key id, running server, test keys, Android status list age, receipt refresh state',
    )
    .option(
      '--json',
      'print {"database","schema","masterKeyId","server","testKeys","revocationList","receipts"}',
    )
    .addHelpText(
      'after',
      `
Exit 0, or 3 when the database cannot be reached (the report is printed all the same).

Examples:
  $ attest status
  $ DATABASE_URL=postgres://attest@db/attest attest status --json`,
    )
    .action(async (opts: { json?: boolean }) => {
      const cfg = config();
      const embedded = !cfg.databaseUrl;
      const dataDir = resolve(cfg.dataDir);
      const report: StatusReport = {
        database: {
          kind: embedded ? 'embedded' : 'postgres',
          where: embedded ? dataDir : redactUrl(cfg.databaseUrl!),
          reachable: false,
        },
        schema: null,
        masterKeyId: null,
        server: null,
        testKeys: cfg.testKeys ? 'on' : 'off',
        revocationList: null,
        receipts: null,
      };
      if (embedded) {
        const holder = lockHolder(dataDir);
        if (holder)
          report.server = {
            pid: holder.pid,
            process: processName(holder.pid),
            address: holder.address ?? null,
          };
      }
      let failure: CliError | undefined;
      if (embedded && !existsSync(join(dataDir, 'pgdata', 'PG_VERSION'))) {
        report.database.error = 'no database yet ("attest db migrate" or "attest serve" makes it)';
      } else {
        try {
          // through the running server when there is one: it alone opens the embedded database
          await withAdmin((admin) => readDatabase(admin, report, androidRevocationUrl(cfg)), {
            requireMigrated: false,
          });
          report.database.reachable = true;
        } catch (err) {
          if (!(err instanceof CliError) || err.exitCode !== EXIT.runtime) throw err;
          report.database.error = err.message;
          failure = err;
        }
      }
      if (opts.json) printJson(report);
      else process.stdout.write(describe(report));
      if (failure) throw failure;
    });
}

async function readDatabase(
  admin: Admin,
  report: StatusReport,
  revocationUrl: string | null,
): Promise<void> {
  const migrations = await admin.run('db.status', {});
  const applied = migrations.filter((m) => m.applied).length;
  const pending = migrations.length - applied;
  report.schema = { applied, pending, state: pending === 0 ? 'current' : 'pending' };
  report.masterKeyId = await admin.run('db.masterKeyId', {});
  // the tables below come with the migrations: a database behind on them has nothing to show yet
  if (pending > 0) return;
  const now = new Date();
  const list = await admin.run('android.revocations.show', {});
  if (list)
    report.revocationList = {
      source: list.source,
      takenAt: list.takenAt.toISOString(),
      updatedAt: list.updatedAt.toISOString(),
      ageSeconds: Math.max(0, Math.floor((now.getTime() - list.takenAt.getTime()) / 1000)),
      entries: list.entryCount,
      refreshFrom: revocationUrl,
    };
  const receipts = await admin.run('apple.receipts.summary', { at: now });
  report.receipts = {
    ...receipts,
    lastRefreshedAt: receipts.lastRefreshedAt?.toISOString() ?? null,
  };
}

/** A whole-unit age: 45 s, 12 min, 5 h, 3 d. */
function age(seconds: number): string {
  if (seconds < 60) return `${seconds} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min`;
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)} h`;
  return `${Math.floor(seconds / 86_400)} d`;
}

function describeRevocations(r: StatusReport): string {
  const list = r.revocationList;
  if (!list)
    return r.database.reachable && r.schema?.pending === 0
      ? '(none stored yet: "attest serve" stores the shipped snapshot)'
      : '-';
  const refresh = list.refreshFrom
    ? `serve refreshes it from ${list.refreshFrom}`
    : 'not refreshed (ATTEST_ANDROID_REVOCATION_URL=off)';
  return `${list.source}, taken ${age(list.ageSeconds)} ago, ${list.entries} entries; ${refresh}`;
}

function describeReceipts(r: StatusReport): string {
  const x = r.receipts;
  if (!x) return '-';
  const teams =
    x.teams === 0
      ? 'not refreshed: no DeviceCheck key ("attest apple credentials add")'
      : `${x.teams} team(s) with a DeviceCheck key${x.refusedTeams ? `, ${x.refusedTeams} refused by Apple` : ''}`;
  const last = x.lastRefreshedAt ? `, last refresh ${x.lastRefreshedAt}` : '';
  return `${x.receipts} stored, ${x.due} due, ${x.failing} backing off${last}; ${teams}`;
}

function describe(r: StatusReport): string {
  const rows: [string, string][] = [
    [
      'database',
      `${r.database.kind} ${r.database.where}${r.database.error ? ` (${r.database.error})` : ''}`,
    ],
    [
      'schema',
      r.schema
        ? r.schema.pending === 0
          ? `current (${r.schema.applied} migrations applied)`
          : `${r.schema.pending} migration(s) pending: "attest db migrate" or "attest serve" applies them`
        : '-',
    ],
    ['master key', r.masterKeyId ?? '(none recorded yet)'],
    [
      'server',
      r.server
        ? `${r.server.process}${r.server.address ? `, CLI socket ${r.server.address}` : ''}`
        : r.database.kind === 'postgres'
          ? '(not tracked on PostgreSQL: ask your supervisor or /readyz)'
          : 'none running on this data dir',
    ],
    ['test keys', `${r.testKeys} (ATTEST_TEST_KEYS)`],
    ['revocations', describeRevocations(r)],
    ['receipts', describeReceipts(r)],
  ];
  return `${rows.map(([k, v]) => `${k.padEnd(12)}${v}`).join('\n')}\n`;
}
