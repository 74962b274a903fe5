import { existsSync } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Command } from 'commander';
import { REJECT_REASONS } from '../../core/rejectReasons.js';
import { acceptedServiceNames, serviceNamed } from '../../core/services.js';
import { parseDuration } from '../../core/duration.js';
import { CliError, usageError } from '../errors.js';
import type { LogFilter } from '../logs/logFilter.js';
import { expandFiles } from '../logs/mergeFiles.js';
import type { LogsIo, LogsOptions } from '../logs/runLogs.js';

const MAX_LIMIT = 1_000_000;

interface RawOptions {
  follow?: boolean;
  json?: boolean;
  rejections?: boolean;
  observed?: boolean;
  reason?: string;
  service?: string;
  key?: string;
  search?: string;
  limit?: string;
  since?: string;
  until?: string;
  status?: string;
}

const EXAMPLES = `
Examples:
  $ attest logs /var/log/attest.log                       browse the log (q quits)
  $ attest logs /var/log/attest.log --follow              watch it live, across log rotation
  $ attest logs app.log --rejections --service apple      start with only Apple rejections shown
  $ attest logs app.log --reason apple_counter_replay --json | jq -r .keyId
  $ attest logs app.log --rejections | head               plain lines when the output is not a terminal
  $ docker logs attest 2>&1 | attest logs                 the log on stdin
  $ attest logs 'logs/*.log' --since 1h --status 403      several instances merged by time
  $ attest logs a.log b.log --since 2026-11-22T21:00Z --until 2026-11-22T22:00Z

Keys: ↑↓/j k move · PgUp/PgDn page · g/G first/last · Enter/Tab whole record · / search ·
      r rejections · o observed · s service · e/E reason · a/A API key · c clear filters · q quit
Plain lines: [instance] time status route service valid|invalid reason|auth:cause keyId|packageName requestId ["detail"]
(instance only with several files). Reason codes and what they mean: docs/checks.md.

The viewer runs when stdout is a terminal. With the log on stdin it reads keys from /dev/tty
(as less does); with no terminal to open, it prints plain lines. --json always prints NDJSON.
`;

/**
 * The log file of this configuration's server, for `attest logs` run on a terminal with no FILE:
 * ATTEST_LOG_FILE, else the file `dev up` writes in the data dir. `serve` alone logs to stdout.
 */
async function serverLogFile(): Promise<string> {
  const { config } = await import('../context.js'); // the configuration only when it is needed
  const cfg = config();
  if (cfg.logFile !== undefined) return cfg.logFile;
  const devLog = join(cfg.dataDir, 'attest.log');
  if (existsSync(devLog)) return devLog;
  throw usageError(
    'no log given: attest serve writes its log to stdout; give the log FILE (serve writes one where ATTEST_LOG_FILE says), or pipe the log: journalctl -u attest -o cat | attest logs',
  );
}

/** Checks the FILE argument up front, so a typo is a one-line usage error rather than an empty screen. */
async function checkFile(file: string): Promise<void> {
  let isDirectory: boolean;
  try {
    const info = await stat(file);
    isDirectory = info.isDirectory();
    // stat before open: opening a FIFO with no writer would block forever
    if (!isDirectory && !info.isFile())
      throw usageError(
        `${file} is not a regular file (a FIFO, a device or a socket): give the log file, or pipe the log on stdin (-)`,
      );
    await (await open(file, 'r')).close();
  } catch (e) {
    if (e instanceof CliError) throw e;
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT')
      throw usageError(
        `cannot read ${file}: no such file; give the path of the server's ATTEST_LOG_FILE, or pipe the log on stdin`,
      );
    if (code === 'EACCES' || code === 'EPERM')
      throw usageError(`cannot read ${file}: permission denied; run as a user that can read it`);
    throw usageError(
      `cannot read ${file}: ${code ?? String(e)}; give a readable log file, or pipe the log on stdin`,
    );
  }
  if (isDirectory)
    throw usageError(`${file} is a directory: give the log file (ATTEST_LOG_FILE) itself`);
}

/** ISO 8601 with an offset (as pino writes `time`), minutes at least; without an offset JavaScript would read local time. */
const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$/i;

/** `--since` / `--until`: an ISO instant, or a duration before now (`90m`, `2h`, `1d`). */
function instantFlag(flag: string, text: string, now: () => Date): number {
  if (ISO_INSTANT.test(text)) {
    const ms = Date.parse(text);
    if (!Number.isNaN(ms)) return ms;
  }
  const seconds = parseDuration(text);
  if (seconds !== null && !ISO_INSTANT.test(text)) return now().getTime() - seconds * 1000;
  throw usageError(
    `${flag} takes an ISO time with its offset (2026-11-22T21:00:00Z) or a duration before now (30m, 2h, 1d), got "${text}"`,
  );
}

/** `--status`: `403`, or a class such as `4xx`. */
function statusFlag(text: string): { min: number; max: number } {
  const exact = /^([1-5]\d\d)$/.exec(text);
  if (exact) return { min: Number(text), max: Number(text) };
  const range = /^([1-5])xx$/i.exec(text);
  if (range) return { min: Number(range[1]) * 100, max: Number(range[1]) * 100 + 99 };
  throw usageError(
    `--status takes an HTTP status such as 403, or a class such as 4xx, got "${text}"`,
  );
}

/**
 * Validates the flags into the options of `runLogs`.
 * @param files - the FILE arguments (none or `-`: stdin; several or a glob: merged by time)
 * @param raw - commander's options
 * @param now - the clock for `--since 1h`
 */
export async function parseLogsOptions(
  files: string | readonly string[] | undefined,
  raw: RawOptions,
  now: () => Date = () => new Date(),
): Promise<LogsOptions> {
  const service = raw.service === undefined ? undefined : serviceNamed(raw.service);
  if (raw.service !== undefined && service === undefined)
    throw usageError(`unknown service "${raw.service}": use ${acceptedServiceNames()}`);
  if (raw.reason !== undefined && !(REJECT_REASONS as readonly string[]).includes(raw.reason)) {
    throw usageError(
      `unknown reason "${raw.reason}": use a code such as apple_counter_replay (listed in docs/checks.md)`,
    );
  }
  let limit: number | undefined;
  if (raw.limit !== undefined) {
    limit = Number(raw.limit);
    if (!/^\d+$/.test(raw.limit) || limit < 1 || limit > MAX_LIMIT) {
      throw usageError(`--limit must be a whole number from 1 to ${MAX_LIMIT}, got "${raw.limit}"`);
    }
  }
  if (raw.key === '') throw usageError('--key needs an API key id (see attest keys list)');
  const since = raw.since === undefined ? undefined : instantFlag('--since', raw.since, now);
  const until = raw.until === undefined ? undefined : instantFlag('--until', raw.until, now);
  if (since !== undefined && until !== undefined && since > until)
    throw usageError('--since is after --until: nothing could match');
  const args = typeof files === 'string' ? [files] : [...(files ?? [])];
  if (args.includes('-') && args.length > 1)
    throw usageError('"-" (stdin) cannot be merged with files: give files, or pipe one log');
  const paths =
    args.length === 0 || (args.length === 1 && args[0] === '-') ? [] : await expandFiles(args);
  for (const path of paths) await checkFile(path);
  if (paths.length > 1 && raw.follow === true)
    throw usageError(
      '--follow takes one file: merge several files without --follow, or follow each in its own terminal',
    );
  const filter: LogFilter = {
    rejectionsOnly: raw.rejections === true,
    ...(raw.observed === true ? { observedOnly: true } : {}),
    reason: raw.reason,
    service,
    apiKeyId: raw.key,
    search: raw.search ?? '',
    ...(since !== undefined ? { since } : {}),
    ...(until !== undefined ? { until } : {}),
    ...(raw.status !== undefined ? { status: statusFlag(raw.status) } : {}),
  };
  const source = paths.length > 1 ? { files: paths } : paths.length === 1 ? { file: paths[0] } : {};
  return { ...source, follow: raw.follow === true, json: raw.json === true, limit, filter };
}

/**
 * `attest logs [FILE|-] [--follow] [--json] [--rejections] [--observed] [--reason R] [--service S] [--key ID] [--search TEXT] [--limit N]`.
 * Its action is async and throws `CliError` (usage errors exit 2): run it with `parseAsync`.
 * @param io - the process streams (tests pass their own)
 */
export function logsCommand(io?: LogsIo): Command {
  return new Command('logs')
    .description('browse the service log: a viewer on a terminal, filtered plain lines otherwise')
    .argument(
      '[files...]',
      'the pino JSON log (the server\'s ATTEST_LOG_FILE); several files or a quoted glob: merged by time; "-": stdin; none: stdin when piped, else ATTEST_LOG_FILE (or dev up\'s log), followed',
    )
    .option(
      '-f, --follow',
      'keep reading as the file grows; survives rotation (rename or copytruncate); stdin is always read to its end',
    )
    .option('--json', 'print the matching lines as NDJSON, exactly as written (never the viewer)')
    .option('--rejections', 'only rejected verifications (isValid false)')
    .option(
      '--observed',
      'only valid verifications that failed an observed rule (what --enforce would turn away)',
    )
    .option('--reason <code>', 'only this reason code, e.g. apple_counter_replay')
    .option('--service <service>', `only this evidence kind: ${acceptedServiceNames()}`)
    .option(
      '--since <time>',
      'only lines at or after this ISO time, or this long ago (30m, 2h, 1d)',
    )
    .option('--until <time>', 'only lines at or before this ISO time, or this long ago')
    .option('--status <code>', 'only responses with this HTTP status (403) or class (4xx)')
    .option('--key <id>', 'only requests made with this API key id')
    .option('--search <text>', 'only lines containing this text (case-insensitive)')
    .option(
      '--limit <n>',
      'viewer: lines kept in memory (default 10000); plain output: only the last N matching lines',
    )
    .addHelpText('after', EXAMPLES)
    .action(async (files: string[], raw: RawOptions) => {
      // no FILE and nothing piped: the running server's log, followed when the viewer shows it
      const stdin = io?.stdin ?? process.stdin;
      const stdout = io?.stdout ?? process.stdout;
      const implicit = files.length === 0 && stdin.isTTY === true;
      const options = await parseLogsOptions(implicit ? [await serverLogFile()] : files, {
        ...raw,
        follow: raw.follow ?? (implicit && stdout.isTTY === true && raw.json !== true),
      });
      // ink and react take seconds to load: only the command that draws pays for them
      const { runLogs } = await import('../logs/runLogs.js');
      await runLogs(options, io);
    });
}
