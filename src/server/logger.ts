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
  /** writes whole NDJSON lines made by another process (a cluster worker's) to the same streams */
  writeLines(lines: string): void;
};

/** pino NDJSON to stdout, and also to `file` when set (what `attest logs` reads). */
export function createLogger(options: {
  level: string;
  file?: string | undefined;
  stdout?: boolean;
}): ServiceLogger {
  const streams: pino.StreamEntry[] = [];
  const stdout = options.stdout !== false ? pino.destination({ dest: 1, sync: false }) : undefined;
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
        mode: LOG_FILE_MODE,
      })
    : undefined;
  if (file) streams.push({ stream: file, level: options.level as pino.Level });
  const logger = pino(loggerOptions(options.level), pino.multistream(streams));
  return Object.assign(logger, {
    reopen: () => file?.reopen(),
    // one writer per stream (this process) keeps every line whole: several processes writing to one
    // pipe could interleave theirs mid-line beyond PIPE_BUF bytes, or after a partial write
    writeLines: (lines: string) => {
      stdout?.write(lines);
      file?.write(lines);
    },
  });
}

/**
 * A cluster worker's log: the service's options and level, its lines handed to `send` as whole
 * lines, batched once per turn of the event loop (one IPC message for many requests), for the
 * primary to write with its own (ServiceLogger.writeLines). `flush` sends what is batched now.
 */
export function createForwardingLogger(level: string, send: (lines: string) => void): Logger {
  let batch = '';
  let scheduled = false;
  const flush = (done?: () => void) => {
    scheduled = false;
    if (batch !== '') {
      const lines = batch;
      batch = '';
      send(lines);
    }
    done?.();
  };
  const stream = {
    write(line: string) {
      batch += line;
      if (!scheduled) {
        scheduled = true;
        setImmediate(() => flush());
      }
    },
    flush,
  };
  return pino(loggerOptions(level), stream);
}
