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

/** pino NDJSON to stdout, and also to `file` when set (what `attest logs` reads). */
export function createLogger(options: {
  level: string;
  file?: string | undefined;
  stdout?: boolean;
}): Logger & { reopen(): void } {
  const streams: pino.StreamEntry[] = [];
  if (options.stdout !== false)
    streams.push({
      stream: pino.destination({ dest: 1, sync: false }),
      level: options.level as pino.Level,
    });
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
  // after a rename-style rotation, SIGHUP makes the file stream write to the new file
  return Object.assign(logger, { reopen: () => file?.reopen() });
}
