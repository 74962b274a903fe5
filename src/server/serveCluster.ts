/**
 * `attest serve --workers N` (N > 1): this process, the primary, owns the database, runs what
 * must run once (migrations, the admin socket, the pruners and refreshers, the /metrics sum and
 * ATTEST_METRICS_PORT) and supervises; N node:cluster workers (clusterWorker.ts) share the API
 * port and serve HTTP, each with its own pool on the database, its own log lines and its own
 * statistics' writes. Where Node has `reusePort` (balancingOf), each worker listens on the port
 * itself and the kernel spreads the connections; elsewhere the primary hands each one over.
 */
import cluster, { type Worker } from 'node:cluster';
import type { X509Certificate } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import { AggregatorRegistry, type Registry } from 'prom-client';
import type { Config } from '../config.js';
import type { DatabaseHandle } from '../db/database.js';
import { balancingOf } from '../workers.js';
import { reservePort } from './httpListen.js';
import { isAttestMessage, type FromWorker, type ToWorker } from './clusterMessages.js';
import { PROPAGATION_MS } from './propagation.js';
import {
  DRAIN_MS,
  embeddedRefusesWorkers,
  listenMetrics,
  prepareDatabase,
  startFeed,
  type RunningServer,
  type StartOptions,
} from './start.js';
import { startAdmin } from './startAdmin.js';
import { startJobs } from './startJobs.js';
import { startStats } from './startStats.js';
import { wireApp } from './wireApp.js';

/** Worker deaths within CRASH_WINDOW_MS that stop the server rather than start another worker. */
export const CRASH_LIMIT = 5;
export const CRASH_WINDOW_MS = 30_000;
/** the wait before a dead worker's replacement starts: doubled for each recent death, at most the last */
const BACKOFF_MS = [100, 200, 400, 800, 1600, 3200];
/** how long a worker has to answer for its metrics or a reload before it is left out */
const ANSWER_MS = 2000;

export async function serveCluster(
  database: DatabaseHandle,
  appleRoots: readonly X509Certificate[],
  config: Config,
  logger: Logger,
  options: StartOptions,
): Promise<RunningServer> {
  const count = config.workers ?? 1;
  // the database is shared by N + 1 processes: each worker connects to the primary's
  if (!database.url) throw embeddedRefusesWorkers(count);
  const databaseUrl = database.url;
  const cores = availableParallelism();
  if (count > cores)
    logger.warn(
      { workers: count, cores },
      `${count} workers on ${cores} cores: they take turns on the CPU rather than add to it (auto starts one per core)`,
    );
  const propagationMs = options.propagationMs ?? PROPAGATION_MS;
  const { masterKey, box } = await prepareDatabase(database, config, logger, options);
  // the primary's own app is never served: it holds the caches the jobs and gauges read, and it
  // makes the first result token keys before any worker looks for them
  const stats = await (async () => {
    let made: Awaited<ReturnType<typeof startStats>> | undefined;
    const wired = await wireApp(database, box, appleRoots, config, logger, {
      ...options,
      propagationMs,
      runsJobs: true,
      stats: async (allowlist, onWriteError) =>
        (made = await startStats(database, config, logger, allowlist, {
          ...options,
          propagationMs,
          onWriteError,
        })),
    });
    return { wired, recorder: made!.recorder };
  })();
  const { wired, recorder } = stats;

  // one scrape, every process: counters and histograms summed, gauges as each declares
  const sum = async (): Promise<string> => {
    const [own, each] = await Promise.all([
      wired.metrics.registry.getMetricsAsJSON(),
      pool.metrics(),
    ]);
    return await AggregatorRegistry.aggregate([own, ...each]).metrics();
  };
  const balancing = balancingOf();
  // port 0 (any): the workers must all listen on one port, which the primary holds until they do
  const reserved =
    balancing === 'reusePort' && config.port === 0 ? await reservePort(config.host) : undefined;
  const pool = superviseWorkers({
    count,
    start: {
      attest: 'start',
      reusePort: balancing === 'reusePort',
      // a key the primary read from (or made in) the data dir is read there by each worker too:
      // a worker's handle is a plain PostgreSQL one, which never looks in the data dir itself
      // and the primary's connection plan, so that workers need not probe a pooler again
      config: {
        ...config,
        ...(reserved ? { port: reserved.port } : {}),
        ...(masterKey.defaultFile ? { masterKeyFile: masterKey.defaultFile } : {}),
        changeFeed: database.connections?.feed ?? config.changeFeed,
      },
      databaseUrl,
      propagationMs,
    },
    logger,
    scrape: sum,
  });

  // the primary alone hears of changes (LISTEN or polling) and tells its workers
  const feed = await startFeed(
    database,
    logger,
    wired.reloadNow,
    (table) => {
      pool.reload(table);
      options.onChange?.(table);
    },
    () => pool.reload(),
  );
  // a change made through the admin socket applies on every worker before the command returns
  const admin = database.announce
    ? await startAdmin(database, config, logger, box, async () => {
        await Promise.all([wired.reload(), pool.reloadAll()]);
      })
    : null;

  let metrics: Awaited<ReturnType<typeof listenMetrics>>;
  let listening: { url: string; port: number };
  try {
    metrics = await listenMetrics(config, logger, sum);
    try {
      listening = await pool.start();
    } catch (err) {
      await metrics?.server.drain(0);
      throw err;
    } finally {
      await reserved?.release();
    }
  } catch (err) {
    await pool.stop();
    await admin?.stop();
    await feed?.stop();
    wired.breaker?.stop();
    throw err;
  }
  logger.info(
    {
      url: listening.url,
      database: database.kind,
      where: database.where,
      workers: count,
      balancing,
      changeFeed: feed?.mode ?? 'none',
    },
    'listening',
  );
  recorder?.start();
  const jobs = startJobs(database, box, config, logger, wired, options);

  return {
    url: listening.url,
    port: listening.port,
    balancing,
    ...(metrics ? { metricsUrl: metrics.url } : {}),
    database,
    masterKey: {
      id: masterKey.key.id,
      source: masterKey.source,
      created: masterKey.created,
      ...(masterKey.defaultFile ? { defaultFile: masterKey.defaultFile } : {}),
    },
    reloadNow() {
      wired.reloadNow();
      pool.reload();
    },
    failed: database.failed ? Promise.race([pool.failed, database.failed]) : pool.failed,
    async close() {
      // every worker drains as one process does; the metrics listener with them
      const drained = Promise.all([pool.stop(), metrics?.server.drain(DRAIN_MS)]);
      await jobs.stop();
      await Promise.all([drained, admin?.stop(), feed?.stop()]);
      // the primary's own counts (it serves no request: none, unless a job counts)
      await recorder?.stop();
      await wired.telemetry?.shutdown();
      wired.breaker?.stop();
      await database.close();
    },
  };
}

type Metrics = Awaited<ReturnType<Registry['getMetricsAsJSON']>>;
type StartMessage = Extract<ToWorker, { attest: 'start' }>;

/**
 * Forks `count` workers, hands each what to serve, answers their scrapes, relays a log reopen
 * (SIGHUP), and replaces one that dies (after a backoff) until CRASH_LIMIT die within
 * CRASH_WINDOW_MS: then `failed` resolves and no more are started.
 */
function superviseWorkers(options: {
  count: number;
  start: StartMessage;
  logger: Logger;
  scrape(): Promise<string>;
}) {
  const { logger } = options;
  cluster.setupPrimary({
    exec: fileURLToPath(new URL('./clusterWorker.js', import.meta.url)),
    args: [],
  });
  interface State {
    listening: boolean;
    fatal?: string;
    /** resolves once it has exited and its channel closed (every message of it handled) */
    gone: Promise<void>;
  }
  const workers = new Map<Worker, State>();
  let stopping = false;
  let gaveUp = false;
  const deaths: number[] = [];
  const timers = new Set<NodeJS.Timeout>();
  let nextId = 0;
  const answers = new Map<number, (worker: Worker, message: FromWorker) => void>();
  let started: { resolve(v: { url: string; port: number }): void; reject(e: Error): void } | null =
    null;
  let first: { url: string; port: number } | undefined;
  let fail!: (err: Error) => void;
  const failed = new Promise<Error>((resolve) => (fail = resolve));

  const sendTo = (worker: Worker, message: ToWorker) => {
    if (worker.isConnected()) worker.send(message, undefined, () => {});
  };
  // a rename-style rotation signals the primary: every worker writes its own lines to the file
  const reopen = () => {
    for (const w of workers.keys()) sendTo(w, { attest: 'reopen' });
  };
  process.on('SIGHUP', reopen);

  /** @param replaces - the pid of the dead worker this one replaces */
  function fork(replaces?: number): void {
    const worker = cluster.fork();
    let exited = false;
    let disconnected = false;
    let markGone!: () => void;
    const state: State = {
      listening: false,
      gone: new Promise<void>((resolve) => (markGone = resolve)),
    };
    workers.set(worker, state);
    const maybeGone = () => exited && disconnected && markGone();
    worker.on('disconnect', () => {
      disconnected = true;
      maybeGone();
    });
    worker.on('message', (message: unknown) => {
      if (!isAttestMessage(message)) return;
      const m = message as FromWorker;
      switch (m.attest) {
        case 'ready':
          sendTo(worker, options.start);
          return;
        case 'listening':
          state.listening = true;
          first ??= { url: m.url, port: m.port };
          if (replaces !== undefined)
            logger.info(
              { workerPid: worker.process.pid, replaces },
              `worker ${worker.process.pid} listening in place of ${replaces}`,
            );
          if (started && [...workers.values()].filter((s) => s.listening).length >= options.count) {
            started.resolve(first);
            started = null;
          }
          return;
        case 'scrape': {
          const id = m.id;
          options.scrape().then(
            (text) => sendTo(worker, { attest: 'scraped', id, text }),
            (err: unknown) => {
              logger.warn({ err: String(err) }, 'could not sum the workers’ metrics');
              sendTo(worker, { attest: 'scraped', id, text: null });
            },
          );
          return;
        }
        case 'fatal':
          state.fatal = m.cause;
          return;
        case 'reloaded':
        case 'metrics':
          answers.get(m.id)?.(worker, m);
          return;
        case 'stopped':
          return;
      }
    });
    worker.on('exit', (code, signal) => {
      exited = true;
      // a worker killed outright never closes its channel in an orderly way: 'disconnect' came or comes now
      if (!worker.isConnected()) disconnected = true;
      maybeGone();
      workers.delete(worker);
      if (stopping) return;
      const pid = worker.process.pid;
      const cause = state.fatal ?? (signal ? `killed by ${signal}` : `exited with code ${code}`);
      if (started) {
        started.reject(new Error(`a worker could not start: ${cause}`));
        started = null;
        return;
      }
      const now = Date.now();
      deaths.push(now);
      while (deaths.length > 0 && deaths[0]! <= now - CRASH_WINDOW_MS) deaths.shift();
      if (deaths.length >= CRASH_LIMIT) {
        if (gaveUp) return;
        gaveUp = true;
        const message = `workers keep dying (${deaths.length} in ${CRASH_WINDOW_MS / 1000} s; the last, pid ${pid}: ${cause}): stopping`;
        logger.error({ workerPid: pid, code, signal, cause }, message);
        fail(new Error(message));
        return;
      }
      const delay = BACKOFF_MS[Math.min(deaths.length - 1, BACKOFF_MS.length - 1)]!;
      logger.error(
        { workerPid: pid, code, signal, cause, restartInMs: delay },
        `worker ${pid} died (${cause}): starting another in ${delay} ms`,
      );
      const timer = setTimeout(() => {
        timers.delete(timer);
        if (!stopping && !gaveUp) fork(pid);
      }, delay);
      timers.add(timer);
    });
  }

  /** Sends `make(id)` to every listening worker; resolves with their answers (ANSWER_MS at most). */
  function ask<T>(make: (id: number) => ToWorker, take: (message: FromWorker) => T): Promise<T[]> {
    const targets = [...workers].filter(([w, s]) => s.listening && w.isConnected()).map(([w]) => w);
    if (targets.length === 0) return Promise.resolve([]);
    const id = nextId++;
    return new Promise<T[]>((resolve) => {
      const got: T[] = [];
      const waiting = new Set(targets);
      const done = () => {
        clearTimeout(timer);
        answers.delete(id);
        resolve(got);
      };
      const timer = setTimeout(done, ANSWER_MS);
      answers.set(id, (worker, message) => {
        if (!waiting.delete(worker)) return;
        got.push(take(message));
        if (waiting.size === 0) done();
      });
      for (const w of targets) sendTo(w, make(id));
    });
  }

  return {
    failed,
    /** forks the workers; resolves once every one listens, rejects when one dies first */
    start(): Promise<{ url: string; port: number }> {
      return new Promise((resolve, reject) => {
        started = { resolve, reject };
        for (let i = 0; i < options.count; i++) fork();
      });
    },
    /** every listening worker's metrics, as prom-client's JSON (left out: one that did not answer) */
    metrics(): Promise<Metrics[]> {
      return ask(
        (id) => ({ attest: 'metrics', id }),
        (m) => (m.attest === 'metrics' ? (m.metrics as Metrics) : []),
      );
    },
    /** tells every worker of a change announced by the database (no answer awaited) */
    reload(table?: string): void {
      for (const w of workers.keys())
        sendTo(w, { attest: 'reload', ...(table !== undefined ? { table } : {}) });
    },
    /** drops every worker's caches; resolves once each has read the allowlist again */
    async reloadAll(): Promise<void> {
      await ask(
        (id) => ({ attest: 'reload', id }),
        () => undefined,
      );
    },
    /** drains every worker (each answers what is in flight) and waits for them to exit */
    async stop(): Promise<void> {
      stopping = true;
      process.off('SIGHUP', reopen);
      for (const t of timers) clearTimeout(t);
      timers.clear();
      const all = [...workers];
      for (const [w] of all) sendTo(w, { attest: 'stop' });
      // a worker that hangs past its drain is killed: the shutdown must end
      const kill = setTimeout(() => {
        for (const [w] of all) if (!w.isDead()) w.process.kill('SIGKILL');
      }, DRAIN_MS + 3000);
      await Promise.all(all.map(([, s]) => s.gone));
      clearTimeout(kill);
    },
  };
}
