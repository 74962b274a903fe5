/**
 * A worker of `attest serve --workers N` (node:cluster runs this file): it serves HTTP with its
 * own database pool and caches, writes its own log lines (to the stdout it shares with the
 * primary, and to the log file: whole lines, logger.ts) and its own verification statistics (the
 * flush is idempotent per batch), and leaves what runs once to the primary (serveCluster.ts):
 * migrations, jobs, the admin socket, the statistics' pruning, the /metrics sum. What passes
 * between them is in clusterMessages.ts.
 */
import cluster from 'node:cluster';
import type { Server } from 'node:http';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { peculiarX509 } from '../core/apple/peculiarX509.js';
import { configuredAppleRoots } from '../configuredAppleRoots.js';
import { openDatabase } from '../db/client.js';
import type { DatabaseHandle } from '../db/database.js';
import { describeFault } from './app.js';
import { isAttestMessage, type FromWorker, type ToWorker } from './clusterMessages.js';
import { drainable, type Drainable } from './drainable.js';
import { listen, portOf, urlOf } from './httpListen.js';
import { createLogger, type ServiceLogger } from './logger.js';
import { DRAIN_MS, prepareDatabase, SERVER_OPTIONS } from './start.js';
import { startStats } from './startStats.js';
import { wireApp, type WiredApp } from './wireApp.js';

/** Sends `message` to the primary; resolves once it is written to the channel. */
function send(message: FromWorker): Promise<void> {
  return new Promise((resolve, reject) => {
    if (!process.connected) return reject(new Error('the primary is gone'));
    process.send!(message, undefined, {}, (err: Error | null) => (err ? reject(err) : resolve()));
  });
}

/** Dies of `err` after telling the primary why (it logs the cause and starts another worker). */
function die(err: unknown): void {
  const exit = () => process.exit(1);
  setTimeout(exit, 1000).unref();
  send({ attest: 'fatal', cause: describeCause(err) }).then(exit, exit);
}

function describeCause(err: unknown): string {
  if (err instanceof Error) return `${err.name}: ${err.message}`.split('\n')[0]!;
  return String(err);
}

export function clusterWorker(): void {
  let logger: ServiceLogger | undefined;
  let running: { api: Drainable; wired: WiredApp; database: DatabaseHandle } | undefined;
  let stopping: Promise<void> | undefined;
  let nextScrape = 0;
  const scrapes = new Map<number, (text: string | null) => void>();

  const stop = () =>
    (stopping ??= (async () => {
      if (running) {
        logger?.debug('draining');
        await running.api.drain(DRAIN_MS);
        // the last counts are written before the pool closes
        await running.wired.stats.recorder?.stop();
        await running.wired.telemetry?.shutdown();
        running.wired.breaker?.stop();
        await running.database.close().catch(() => {});
      }
      logger?.flush();
      await send({ attest: 'stopped' }).catch(() => {});
      process.exit(0);
    })());

  // the primary decides when to stop: a terminal's Ctrl-C reaches every process of the group
  // (each drains once), a SIGTERM to one worker drains it and the primary starts another
  process.on('SIGINT', () => void stop());
  process.on('SIGTERM', () => void stop());
  // the primary reopens the log file on SIGHUP; a hangup of the whole group must not end workers
  process.on('SIGHUP', () => {});
  // the primary died (SIGKILL): nothing would hand this worker's lines, counts or requests on
  process.on('disconnect', () => {
    if (!stopping) process.exit(1);
  });
  process.on('uncaughtException', (err) => {
    logger?.flush();
    die(err);
  });

  process.on('message', (message: unknown) => {
    if (!isAttestMessage(message)) return;
    const m = message as ToWorker;
    switch (m.attest) {
      case 'reopen':
        logger?.reopen();
        return;
      case 'start':
        serve(m.config, m.databaseUrl, m.propagationMs, m.reusePort).catch((err: unknown) => {
          logger?.flush();
          die(err);
        });
        return;
      case 'reload':
        if (!running) return;
        logger?.debug({ table: m.table ?? null }, 'caches dropped after a change');
        if (m.id === undefined) running.wired.reloadNow();
        else {
          const id = m.id;
          void running.wired
            .reload()
            .finally(() => send({ attest: 'reloaded', id }).catch(() => {}));
        }
        return;
      case 'metrics': {
        const id = m.id;
        void (running?.wired.metrics.registry.getMetricsAsJSON() ?? Promise.resolve([])).then(
          (metrics) => send({ attest: 'metrics', id, metrics }).catch(() => {}),
          () => send({ attest: 'metrics', id, metrics: [] }).catch(() => {}),
        );
        return;
      }
      case 'scraped':
        scrapes.get(m.id)?.(m.text);
        scrapes.delete(m.id);
        return;
      case 'stop':
        void stop();
        return;
    }
  });

  /** Every process's metrics summed, asked of the primary (GET /metrics on a worker). */
  const scrape = (): Promise<string> =>
    new Promise((resolve, reject) => {
      const id = nextScrape++;
      const timer = setTimeout(() => {
        scrapes.delete(id);
        reject(new Error('the primary did not answer a scrape within 5 s'));
      }, 5000);
      scrapes.set(id, (text) => {
        clearTimeout(timer);
        if (text === null) reject(new Error('the primary could not sum the metrics'));
        else resolve(text);
      });
      send({ attest: 'scrape', id }).catch(reject);
    });

  async function serve(
    config: Config,
    databaseUrl: string,
    propagationMs: number,
    reusePort: boolean,
  ): Promise<void> {
    const log: Logger = (logger = createLogger({ level: config.logLevel, file: config.logFile }));
    const appleRoots = configuredAppleRoots(config.appleRootCaPath);
    // the primary opened the database and migrated it: this is another pool on it
    const database = await openDatabase({
      url: databaseUrl,
      dataDir: config.dataDir,
      role: 'server',
      changeFeed: config.changeFeed,
      connectTimeoutSeconds: config.dbConnectTimeoutSeconds,
      onDriverFault: (fault) =>
        log.error(
          { err: describeFault(fault) },
          'the database driver failed on a closed connection (postgres.js nextWrite): the pool is replaced',
        ),
    });
    let server: Server;
    let wired: WiredApp;
    try {
      const { box } = await prepareDatabase(database, config, log, { migrate: false });
      wired = await wireApp(database, box, appleRoots, config, log, {
        migrate: false,
        propagationMs,
        runsJobs: false,
        scrape,
        // counted and written here, as one process does (startStats.ts): no counts cross the IPC
        stats: (allowlist, onWriteError) =>
          startStats(database, config, log, allowlist, { propagationMs, onWriteError }),
      });
      server = await listen(wired.app.fetch, config.port, config.host, SERVER_OPTIONS, reusePort);
    } catch (err) {
      await database.close().catch(() => {});
      throw err;
    }
    server.maxHeadersCount = 100;
    running = { api: drainable(server), wired, database };
    wired.stats.recorder?.start();
    setImmediate(peculiarX509).unref();
    await send({
      attest: 'listening',
      url: urlOf(server, config.host, config.port),
      port: portOf(server, config.port),
    });
  }

  void send({ attest: 'ready' });
}

if (cluster.isWorker) clusterWorker();
