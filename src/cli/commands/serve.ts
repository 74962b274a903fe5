import { Command, InvalidArgumentError, Option } from 'commander';
import { parseWorkers, WORKERS_RULE } from '../../workers.js';
import type { RunningServer } from '../../server/start.js';
import { config } from '../context.js';
import { runtimeError } from '../errors.js';
import { startProblem } from '../startProblem.js';

export function serveCommand(): Command {
  return new Command('serve')
    .description('run the HTTP API (applies pending migrations first)')
    .addOption(new Option('--port <n>', 'listen port (env PORT, default 8080)').argParser(port))
    .option('--host <h>', 'listen address (env HOST, default 0.0.0.0)')
    .option('--no-migrate', 'do not apply pending migrations; refuse to start if any are missing')
    .addOption(
      new Option(
        '--metrics-port <n>',
        'serve /metrics on this port instead of the API port (env ATTEST_METRICS_PORT); keep it private',
      ).argParser(port),
    )
    .option(
      '--metrics-host <h>',
      'listen address for --metrics-port (env ATTEST_METRICS_HOST, default 127.0.0.1)',
    )
    .option('--no-test-keys', 'refuse test-mode API keys (403), as ATTEST_TEST_KEYS=off does')
    .addOption(
      new Option(
        '--workers <n>',
        'processes serving HTTP on the one port, or auto: one per core (env ATTEST_WORKERS, default 1), on the embedded database or DATABASE_URL',
      ).argParser(workers),
    )
    .addHelpText(
      'after',
      `
Examples:
  $ attest serve                      # embedded database in ./.attest, port 8080
  $ DATABASE_URL=postgres://attest@db/attest attest serve --port 9000 --no-migrate
  $ attest serve --metrics-port 9464     # /metrics on 127.0.0.1:9464 only
  $ DATABASE_URL=postgres://attest@db/attest attest serve --workers auto   # every core`,
    )
    .action(
      async (opts: {
        port?: number;
        host?: string;
        migrate: boolean;
        metricsPort?: number;
        metricsHost?: string;
        testKeys: boolean;
        workers?: number;
      }) => {
        const cfg = config({
          port: opts.port,
          host: opts.host,
          metricsPort: opts.metricsPort,
          metricsHost: opts.metricsHost,
          workers: opts.workers,
          ...(opts.testKeys ? {} : { testKeys: false }),
        });
        // the HTTP stack loads only for the command that serves
        const [{ createLogger }, { startServer }] = await Promise.all([
          import('../../server/logger.js'),
          import('../../server/start.js'),
        ]);
        const logger = createLogger({ level: cfg.logLevel, file: cfg.logFile });
        let server: RunningServer;
        try {
          server = await startServer(cfg, logger, {
            migrate: opts.migrate,
            onProgress: (message) => process.stderr.write(`${message}\n`),
          });
        } catch (err) {
          logger.flush();
          throw startProblem(err, cfg);
        }
        if (server.masterKey.created)
          process.stderr.write(
            `attest: created a master key in ${server.masterKey.source}: back it up with the data dir (not inside the same backup)\n`,
          );
        const running = server;
        // The handlers are in place before the line that says the server is up: whoever waits
        // for that line (a supervisor, a test) may stop the server at once, and a SIGTERM before
        // them would kill the process without closing (seen beside stress-ng: exit by signal).
        const stopped = stopOnSignal(running, logger);
        process.on('SIGHUP', () => logger.reopen());
        const workerCount = cfg.workers ?? 1;
        process.stderr.write(
          `attest listening on ${server.url} (database: ${server.database.kind}, ${server.database.where}${workerCount > 1 ? `, ${server.balancing === 'reusePort' ? 'connections spread by the kernel (reusePort)' : 'connections handed over by the primary (node:cluster)'}, ${workerCount} workers` : ''})\n`,
        );
        if (server.metricsUrl) process.stderr.write(`metrics on ${server.metricsUrl}\n`);
        const failure = await Promise.race([stopped.then(() => null), server.failed ?? stopped]);
        if (failure) {
          await running.close().catch(() => {});
          logger.flush();
          throw runtimeError(failure.message);
        }
      },
    );
}

function workers(value: string): number {
  const n = parseWorkers(value);
  if (n === null) throw new InvalidArgumentError(`--workers takes ${WORKERS_RULE}`);
  return n;
}

function port(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535)
    throw new InvalidArgumentError('a port is 0 to 65535');
  return n;
}

/**
 * SIGINT or SIGTERM closes `server` (once: npx forwards one signal, the terminal sends the other).
 * Resolves once the server is closed.
 */
export function stopOnSignal(
  server: { close(): Promise<void> },
  logger: { info(message: string): void; flush(): void },
): Promise<void> {
  return new Promise<void>((resolve) => {
    let stopping = false;
    const stop = () => {
      if (stopping) return;
      stopping = true;
      logger.info('shutting down');
      // a shutdown that hangs (a database that never answers) must still end the process
      setTimeout(() => process.exit(1), 10_000).unref();
      server.close().finally(() => {
        logger.flush();
        resolve();
      });
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
}
