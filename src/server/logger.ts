import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import pino, { type Logger } from 'pino';

/** The pino options of the service log (exported so tests log exactly as the service does). */
export function loggerOptions(level: string): pino.LoggerOptions {
  return {
    level,
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    // belt and braces: none of these is ever logged on purpose
    redact: {
      paths: [
        'apiKey',
        'key',
        'token',
        'attestationToken',
        'sessionReference',
        'headers["x-api-key"]',
      ],
      censor: '[redacted]',
    },
    // `err` fields are already described by describeFault(); pino's default serializer would turn
    // their `type` (DeadlineExceeded, DrizzleQueryError...) into "Object"
    serializers: { err: (e: unknown) => (e instanceof Error ? pino.stdSerializers.err(e) : e) },
  };
}

/** Permissions of a log file the service creates (before the umask). */
export const LOG_FILE_MODE = 0o640;

/** The service log: a pino logger whose streams also take lines formatted elsewhere. */
export type ServiceLogger = Logger & {
  /** after a rename-style rotation (SIGHUP): the file stream writes to the new file */
  reopen(): void;
};

/**
 * The most one write to a stream carries: PIPE_BUF on Linux, the size up to which a write to a
 * pipe is atomic. With `serve --workers` every process writes its own lines to the one stdout (and
 * file, opened O_APPEND): each write is whole lines (pino's sonic-boom never splits a line across
 * its buffers) of at most this many bytes, so no process's line is cut by another's; a single
 * line longer than this (a request line is bounded by boundLogFields, and stays far below it in
 * practice) is a write of its own.
 */
export const LOG_WRITE_BYTES = 4096;

/** pino NDJSON to stdout, and also to `file` when set (what `attest logs` reads). */
export function createLogger(options: {
  level: string;
  file?: string | undefined;
  stdout?: boolean;
}): ServiceLogger {
  const streams: pino.StreamEntry[] = [];
  const stdout =
    options.stdout !== false
      ? pino.destination({ dest: 1, sync: false, maxWrite: LOG_WRITE_BYTES })
      : undefined;
  if (stdout) streams.push({ stream: stdout, level: options.level as pino.Level });
  // 0640: the log names API key ids, app ids and why requests were refused; not for every local user.
  // A folder made for it is 0700 before the file is written: under `dev up` it is the data dir,
  // which must not be made 0755 by the log before the database makes it 0700.
  if (options.file) mkdirSync(dirname(options.file), { recursive: true, mode: 0o700 });
  const file = options.file
    ? pino.destination({
        dest: options.file,
        append: true,
        mkdir: true,
        sync: false,
        maxWrite: LOG_WRITE_BYTES,
        mode: LOG_FILE_MODE,
      })
    : undefined;
  if (file) streams.push({ stream: file, level: options.level as pino.Level });
  const logger = pino(loggerOptions(options.level), pino.multistream(streams));
  return Object.assign(logger, {
    reopen: () => file?.reopen(),
  });
}
