import { Command, Option } from 'commander';
import { ConfigError } from '../../config.js';
import { DatabaseBusyError } from '../../db/client.js';
import { createLogger } from '../../server/logger.js';
import { startServer } from '../../server/start.js';
import { config } from '../context.js';
import { runtimeError, usageError } from '../errors.js';

export function serveCommand(): Command {
  return new Command('serve')
    .description('run the HTTP API (applies pending migrations first)')
    .addOption(new Option('--port <n>', 'listen port (env PORT, default 8080)').argParser(port))
    .option('--host <h>', 'listen address (env HOST, default 0.0.0.0)')
    .option('--no-migrate', 'do not apply pending migrations; refuse to start if any are missing')
    .addHelpText('after', `
Examples:
  $ attest serve                      # embedded database in ./.attest, port 8080
  $ DATABASE_URL=postgres://attest@db/attest attest serve --port 9000 --no-migrate`)
    .action(async (opts: { port?: number; host?: string; migrate: boolean }) => {
      const cfg = config({ port: opts.port, host: opts.host });
      const logger = createLogger({ level: cfg.logLevel, file: cfg.logFile });
      let server;
      try {
        server = await startServer(cfg, logger, { migrate: opts.migrate });
      } catch (err) {
        logger.flush();
        if (err instanceof DatabaseBusyError) throw runtimeError(err.message);
        const e = err as NodeJS.ErrnoException;
        if (e.code === 'EADDRINUSE') throw runtimeError(`port ${cfg.port} on ${cfg.host} is in use: pick another with --port or PORT`);
        if (err instanceof ConfigError) throw usageError(`${err.message}; fix it and run again`);
        throw runtimeError(`cannot start: ${e.message}`);
      }
      process.stderr.write(`attest listening on ${server.url} (database: ${server.database.kind}, ${server.database.where})\n`);
      const running = server;
      await new Promise<void>((resolve) => {
        const stop = () => {
          logger.info('shutting down');
          running.close().finally(() => {
            logger.flush();
            resolve();
          });
        };
        process.once('SIGINT', stop);
        process.once('SIGTERM', stop);
        process.on('SIGHUP', () => logger.reopen());
      });
    });
}

function port(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw usageError(`--port must be 0-65535, got "${value}"`);
  return n;
}
