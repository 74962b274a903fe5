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
    .option('--no-test-keys', 'refuse test-mode API keys (403), as ATTEST_TEST_KEYS=off does')
    .addHelpText('after', `
Examples:
  $ attest serve                      # embedded database in ./.attest, port 8080
  $ DATABASE_URL=postgres://attest@db/attest attest serve --port 9000 --no-migrate`)
    .action(async (opts: { port?: number; host?: string; migrate: boolean; testKeys: boolean }) => {
      const cfg = config({ port: opts.port, host: opts.host, ...(opts.testKeys ? {} : { testKeys: false }) });
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
        let stopping = false;
        const stop = () => {
          // SIGINT and SIGTERM often come together (npx forwards one, the terminal sends the other)
          if (stopping) return;
          stopping = true;
          logger.info('shutting down');
          // a shutdown that hangs (a database that never answers) must still end the process
          setTimeout(() => process.exit(1), 10_000).unref();
          running.close().finally(() => {
            logger.flush();
            resolve();
          });
        };
        process.on('SIGINT', stop);
        process.on('SIGTERM', stop);
        process.on('SIGHUP', () => logger.reopen());
      });
    });
}

function port(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw usageError(`--port must be 0-65535, got "${value}"`);
  return n;
}
