import pino, { type Logger } from 'pino';

/** pino NDJSON to stdout, and also to `file` when set (what `attest logs` reads). */
export function createLogger(options: { level: string; file?: string | undefined; stdout?: boolean }): Logger & { reopen(): void } {
  const streams: pino.StreamEntry[] = [];
  if (options.stdout !== false) streams.push({ stream: pino.destination({ dest: 1, sync: false }), level: options.level as pino.Level });
  const file = options.file ? pino.destination({ dest: options.file, append: true, mkdir: true, sync: false }) : undefined;
  if (file) streams.push({ stream: file, level: options.level as pino.Level });
  const logger = pino(
    {
      level: options.level,
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      // belt and braces: none of these is ever logged on purpose
      redact: { paths: ['apiKey', 'key', 'token', 'attestationToken', 'sessionReference', 'headers["x-api-key"]'], censor: '[redacted]' },
    },
    pino.multistream(streams),
  );
  // after a rename-style rotation, SIGHUP makes the file stream write to the new file
  return Object.assign(logger, { reopen: () => file?.reopen() });
}
