import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Command } from 'commander';
import { clusterExists } from '../../db/embeddedServer.js';
import { redactUrl } from '../../db/redactUrl.js';
import { lockHolder } from '../../db/runningServer.js';
import { processName } from '../../db/processName.js';
import { androidRevocationUrl, type Config } from '../../config.js';
import { toMasterKey } from '../../db/secretBox.js';
import { parseRevocationDocument } from '../../core/androidKey/revocationList.js';
import type { ReceiptRefreshSummary } from '../../db/receiptRefreshQueue.js';
import type { UpstreamCheck } from '../../admin/upstreamChecks.js';
import type { Admin } from '../admin.js';
import { config, withAdmin } from '../context.js';
import { CliError, EXIT } from '../errors.js';
import { printJson } from '../output.js';

/** How long one upstream check may take, and how much of its answer is read. */
const CHECK_TIMEOUT_MS = 10_000;
const CHECK_MAX_BYTES = 16 * 1024 * 1024;

/** What `attest status --json` prints. */
export interface StatusReport {
  database: { kind: 'postgres' | 'embedded'; where: string; reachable: boolean; error?: string };
  /** null when there is no database yet (embedded) or it cannot be reached */
  schema: { applied: number; pending: number; state: 'current' | 'pending' } | null;
  /** the master key the database's secrets are sealed with (null: none recorded yet) */
  masterKeyId: string | null;
  /**
   * Why this configuration cannot open those secrets (null: it can, or nothing is sealed yet):
   * the key file is missing or unreadable, or it holds another key. Exit 1.
   */
  masterKeyProblem: string | null;
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
    /** why serve's last refresh from refreshFrom failed, and when (null: it succeeded, or none ran) */
    lastRefreshError: { message: string; at: string } | null;
  } | null;
  /**
   * With --check: each upstream this deployment uses, reached now, ok or failing with the reason
   * (absent without --check). Exit 1 when one fails.
   */
  checks?: UpstreamCheck[];
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
      '--check',
      "reach each upstream this deployment uses now (Google's Android status list, Play's API with each stored service account, Apple's receipt endpoints with each DeviceCheck key) and say ok or failing; exit 1 when one fails",
    )
    .option(
      '--json',
      'print {"database","schema","masterKeyId","masterKeyProblem","server","testKeys","revocationList","receipts"} (and "checks" with --check)',
    )
    .addHelpText(
      'after',
      `
Exit 0; 1 when this configuration cannot open the master key that seals the secrets (its file
missing, or another key), or with --check when an upstream is failing; 3 when the database cannot
be reached (the report is printed all the same). A failed refresh of the Android status list shows
on the revocations line. --check opens the stored service accounts and DeviceCheck keys where the
database is (the running server, else this process) and prints only each check's outcome.

Examples:
  $ attest status
  $ attest status --check
  $ DATABASE_URL=postgres://attest@db/attest attest status --json`,
    )
    .action(async (opts: { json?: boolean; check?: boolean }) => {
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
        masterKeyProblem: null,
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
      let credentialChecks: UpstreamCheck[] | undefined;
      if (embedded && !clusterExists(dataDir)) {
        report.database.error = 'no database yet ("attest db migrate" or "attest serve" makes it)';
      } else {
        try {
          // through the running server when there is one: it alone opens the embedded database
          await withAdmin(
            async (admin) => {
              await readDatabase(admin, report, androidRevocationUrl(cfg));
              if (report.masterKeyId !== null)
                report.masterKeyProblem = await masterKeyProblem(cfg, report.masterKeyId, embedded);
              if (opts.check) credentialChecks = await checkCredentials(admin, report);
            },
            { requireMigrated: false },
          );
          report.database.reachable = true;
        } catch (err) {
          if (!(err instanceof CliError) || err.exitCode !== EXIT.runtime) throw err;
          report.database.error = err.message;
          failure = err;
        }
      }
      // also when the database failed after the key id was read
      if (report.masterKeyId !== null && report.masterKeyProblem === null)
        report.masterKeyProblem = await masterKeyProblem(cfg, report.masterKeyId, embedded);
      if (opts.check)
        report.checks = [
          ...(await checkStatusListUpstream(androidRevocationUrl(cfg))),
          ...(credentialChecks ?? notChecked(report.database.error ?? 'the database was not read')),
        ];
      if (opts.json) printJson(report);
      else process.stdout.write(describe(report));
      if (failure) throw failure;
      // printed above; the exit code says it to a script
      if (report.masterKeyProblem)
        throw new CliError(report.masterKeyProblem, EXIT.negative, false);
      const failing = report.checks?.filter((c) => c.state === 'failing') ?? [];
      if (failing.length > 0)
        throw new CliError(
          failing
            .map(
              (c) =>
                `${c.upstream} ${c.target}${c.credential ? ` as ${c.credential}` : ''}: ${c.detail}`,
            )
            .join('; '),
          EXIT.negative,
          false,
        );
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
      lastRefreshError: list.lastRefreshError
        ? { message: list.lastRefreshError.message, at: list.lastRefreshError.at.toISOString() }
        : null,
    };
  const receipts = await admin.run('apple.receipts.summary', { at: now });
  report.receipts = {
    ...receipts,
    lastRefreshedAt: receipts.lastRefreshedAt?.toISOString() ?? null,
  };
}

/**
 * Whether this configuration holds the master key the database's secrets are sealed with
 * (`sealedWith`): the one problem, or null. The server may run with another environment, but a
 * CLI that cannot open the secrets cannot rotate, back up or add credentials either.
 */
async function masterKeyProblem(
  cfg: Config,
  sealedWith: string,
  embedded: boolean,
): Promise<string | null> {
  // db/masterKey.js loads the database layer: `attest status` through a server has no other use for it
  const { DEFAULT_MASTER_KEY_FILE, readMasterKeyFile } = await import('../../db/masterKey.js');
  let key: { id: string };
  let where: string;
  try {
    if (cfg.masterKey !== undefined) {
      where = 'ATTEST_MASTER_KEY';
      key = toMasterKey(Buffer.from(cfg.masterKey, 'base64'));
    } else if (cfg.masterKeyFile !== undefined) {
      where = cfg.masterKeyFile;
      if (!existsSync(where))
        return `master key ${sealedWith} seals the secrets, but ATTEST_MASTER_KEY_FILE ${where} is missing: restore it from a backup`;
      key = readMasterKeyFile(where, 'ATTEST_MASTER_KEY_FILE');
    } else if (embedded) {
      where = join(resolve(cfg.dataDir), DEFAULT_MASTER_KEY_FILE);
      if (!existsSync(where))
        return `master key ${sealedWith} seals the secrets, but its file ${where} is missing: restore it from a backup, or set ATTEST_MASTER_KEY_FILE`;
      key = readMasterKeyFile(where, where);
    } else {
      return `master key ${sealedWith} seals the secrets, but no master key is configured: set ATTEST_MASTER_KEY_FILE`;
    }
  } catch (err) {
    return `master key ${sealedWith} seals the secrets, but the configured key cannot be read: ${(err as Error).message}`;
  }
  return key.id === sealedWith
    ? null
    : `master key ${sealedWith} seals the secrets, but ${where} holds key ${key.id}`;
}

/**
 * Play's API per stored service account and Apple's receipt endpoints per DeviceCheck key, reached
 * by the process that holds the database and the master key (the running server, or this one):
 * see src/admin/upstreamChecks.ts for what "ok" proves. Not run when nothing is sealed yet (no
 * credential can be stored), when migrations are pending, or when the master key cannot be opened.
 */
async function checkCredentials(admin: Admin, report: StatusReport): Promise<UpstreamCheck[]> {
  if (report.schema?.pending !== 0) return notChecked('migrations are pending');
  if (report.masterKeyProblem) return notChecked('the master key cannot be opened (see above)');
  if (report.masterKeyId === null)
    return notChecked('no credential is stored (nothing is sealed yet)');
  return admin.run('status.checkUpstreams', { timeoutMs: CHECK_TIMEOUT_MS });
}

function notChecked(why: string): UpstreamCheck[] {
  return [
    {
      upstream: 'play-integrity',
      target: 'each stored service account',
      state: 'not checked',
      detail: why,
    },
    {
      upstream: 'apple-receipts',
      target: 'each DeviceCheck key',
      state: 'not checked',
      detail: why,
    },
  ];
}

/**
 * Google's Android status list, reached from this process (no credential needed), bounded in time
 * (CHECK_TIMEOUT_MS) and size (CHECK_MAX_BYTES, the stream cut there), redirects refused. Nothing
 * when ATTEST_ANDROID_REVOCATION_URL=off.
 */
async function checkStatusListUpstream(revocationUrl: string | null): Promise<UpstreamCheck[]> {
  return revocationUrl ? [await checkStatusList(revocationUrl)] : [];
}

async function checkStatusList(url: string): Promise<UpstreamCheck> {
  const failing = (detail: string): UpstreamCheck => ({
    upstream: 'android-status-list',
    target: url,
    state: 'failing',
    detail,
  });
  let text: string;
  try {
    const res = await fetch(url, {
      headers: { Accept: 'application/json' },
      signal: AbortSignal.timeout(CHECK_TIMEOUT_MS),
      redirect: 'error',
    });
    if (!res.ok) {
      await res.body?.cancel();
      return failing(`HTTP ${res.status}`);
    }
    const body = await readBounded(res, CHECK_MAX_BYTES);
    if (body === null) return failing(`the answer is larger than ${CHECK_MAX_BYTES} bytes`);
    text = body;
  } catch (err) {
    const e = err as Error & { cause?: { code?: string; message?: string } };
    if (e.name === 'TimeoutError') return failing(`no answer within ${CHECK_TIMEOUT_MS} ms`);
    return failing(e.cause?.code ?? e.cause?.message ?? e.message);
  }
  try {
    const { entries } = parseRevocationDocument(JSON.parse(text));
    return {
      upstream: 'android-status-list',
      target: url,
      state: 'ok',
      detail: `${entries.size} entries`,
    };
  } catch (err) {
    return failing(`not a status list: ${(err as Error).message}`);
  }
}

/** The body as text, or null when it is longer than `maxBytes` (reading stops there). */
async function readBounded(res: Response, maxBytes: number): Promise<string | null> {
  if (!res.body) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of res.body) {
    size += chunk.byteLength;
    // leaving the loop cancels the stream: nothing more is read
    if (size > maxBytes) return null;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
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
  const failed = list.lastRefreshError
    ? `; LAST REFRESH FAILED at ${list.lastRefreshError.at}: ${list.lastRefreshError.message}`
    : '';
  return `${list.source}, taken ${age(list.ageSeconds)} ago, ${list.entries} entries; ${refresh}${failed}`;
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
    [
      'master key',
      r.masterKeyId
        ? `${r.masterKeyId}${r.masterKeyProblem ? ` (PROBLEM: ${r.masterKeyProblem})` : ''}`
        : '(none recorded yet)',
    ],
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
    ...(r.checks ?? []).map((c): [string, string] => [
      'check',
      `${c.upstream} ${c.target}${c.credential ? ` as ${c.credential}` : ''}: ${c.state} (${c.detail})`,
    ]),
  ];
  return `${rows.map(([k, v]) => `${k.padEnd(12)}${v}`).join('\n')}\n`;
}
