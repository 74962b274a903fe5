import { open, stat } from 'node:fs/promises';
import { Command } from 'commander';
import { REJECT_REASONS } from '../../core/reasons.js';
import { usageError } from '../errors.js';
import type { LogFilter } from '../logs/logFilter.js';
import type { LogsIo, LogsOptions } from '../logs/runLogs.js';

const SERVICES = ['apple', 'gms'];
const MAX_LIMIT = 1_000_000;

interface RawOptions {
  follow?: boolean;
  json?: boolean;
  rejections?: boolean;
  reason?: string;
  service?: string;
  key?: string;
  search?: string;
  limit?: string;
}

const EXAMPLES = `
Examples:
  $ attest logs /var/log/attest.log                       browse the log (q quits)
  $ attest logs /var/log/attest.log --follow              watch it live, across log rotation
  $ attest logs app.log --rejections --service apple      start with only Apple rejections shown
  $ attest logs app.log --reason apple_counter_replay --json | jq -r .keyId
  $ attest logs app.log --rejections | head               plain lines when the output is not a terminal
  $ docker logs attest 2>&1 | attest logs                 the log on stdin

Keys: ↑↓/j k move · PgUp/PgDn page · g/G first/last · Enter/Tab whole record · / search ·
      r rejections · s service · e/E reason · a/A API key · c clear filters · q quit
Plain lines: time status route service valid|invalid reason keyId|packageName requestId

The viewer runs when stdout is a terminal. With the log on stdin it reads keys from /dev/tty
(as less does); with no terminal to open, it prints plain lines. --json always prints NDJSON.
`;

/** Checks the FILE argument up front, so a typo is a one-line usage error rather than an empty screen. */
async function checkFile(file: string): Promise<void> {
  let isDirectory: boolean;
  try {
    isDirectory = (await stat(file)).isDirectory();
    await (await open(file, 'r')).close();
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw usageError(`cannot read ${file}: no such file; give the path of the server's ATTEST_LOG_FILE, or pipe the log on stdin`);
    if (code === 'EACCES' || code === 'EPERM') throw usageError(`cannot read ${file}: permission denied; run as a user that can read it`);
    throw usageError(`cannot read ${file}: ${code ?? String(e)}; give a readable log file, or pipe the log on stdin`);
  }
  if (isDirectory) throw usageError(`${file} is a directory: give the log file (ATTEST_LOG_FILE) itself`);
}

/**
 * Validates the flags into the options of {@link runLogs}.
 * @param file - the FILE argument (`-` or absent: stdin)
 * @param raw - commander's options
 */
export async function parseLogsOptions(file: string | undefined, raw: RawOptions): Promise<LogsOptions> {
  if (raw.service !== undefined && !SERVICES.includes(raw.service)) {
    throw usageError(`unknown service "${raw.service}": use apple or gms`);
  }
  if (raw.reason !== undefined && !(REJECT_REASONS as readonly string[]).includes(raw.reason)) {
    throw usageError(`unknown reason "${raw.reason}": use a code such as apple_counter_replay (see token-format.md section 6)`);
  }
  let limit: number | undefined;
  if (raw.limit !== undefined) {
    limit = Number(raw.limit);
    if (!/^\d+$/.test(raw.limit) || limit < 1 || limit > MAX_LIMIT) {
      throw usageError(`--limit must be a whole number from 1 to ${MAX_LIMIT}, got "${raw.limit}"`);
    }
  }
  if (raw.key === '') throw usageError('--key needs an API key id (see attest keys list)');
  const path = file === undefined || file === '-' ? undefined : file;
  if (path !== undefined) await checkFile(path);
  const filter: LogFilter = {
    rejectionsOnly: raw.rejections === true,
    reason: raw.reason,
    service: raw.service,
    apiKeyId: raw.key,
    search: raw.search ?? '',
  };
  return { file: path, follow: raw.follow === true, json: raw.json === true, limit, filter };
}

/**
 * `attest logs [FILE|-] [--follow] [--json] [--rejections] [--reason R] [--service S] [--key ID] [--search TEXT] [--limit N]`.
 * Its action is async and throws `CliError` (usage errors exit 2): run it with `parseAsync`.
 * @param io - the process streams (tests pass their own)
 */
export function logsCommand(io?: LogsIo): Command {
  return new Command('logs')
    .description('browse the service log: a viewer on a terminal, filtered plain lines otherwise')
    .argument('[file]', 'the pino JSON log (the server\'s ATTEST_LOG_FILE); "-" or none: stdin')
    .option('-f, --follow', 'keep reading as the file grows; survives rotation (rename or copytruncate); stdin is always read to its end')
    .option('--json', 'print the matching lines as NDJSON, exactly as written (never the viewer)')
    .option('--rejections', 'only rejected verifications (isValid false)')
    .option('--reason <code>', 'only this reason code, e.g. apple_counter_replay')
    .option('--service <service>', 'only this platform: apple or gms')
    .option('--key <id>', 'only requests made with this API key id')
    .option('--search <text>', 'only lines containing this text (case-insensitive)')
    .option('--limit <n>', 'viewer: lines kept in memory (default 10000); plain output: only the last N matching lines')
    .addHelpText('after', EXAMPLES)
    .action(async (file: string | undefined, raw: RawOptions) => {
      const options = await parseLogsOptions(file, raw);
      // ink and react are most of the CLI's start-up cost: only `attest logs` loads them
      const { runLogs } = await import('../logs/runLogs.js');
      await runLogs(options, io);
    });
}
