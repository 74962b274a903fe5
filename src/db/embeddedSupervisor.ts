/**
 * Keeps the embedded PostgreSQL server running for as long as attest holds it. A server that
 * exits without being asked (killed, out of memory, a crash) is started again, with backoff, on
 * the same socket and password, so the pools' URL stays right and they reconnect by themselves;
 * meanwhile requests get the database-unavailable answer at once (the breaker). A server that
 * cannot come back within RESTART_BOUND_MS is given up: `failed` resolves, and `attest serve`
 * exits non-zero, so whatever supervises the appliance (systemd, Docker, Kubernetes) restarts it.
 */
import { rmSync } from 'node:fs';
import {
  createSocketFolder,
  startServer,
  type EmbeddedServer,
  type ServerExit,
} from './embeddedServer.js';

/** How long the server may stay down before attest gives up on it. */
export const RESTART_BOUND_MS = 30_000;
/** The first restart's delay, doubled after each failed one up to MAX_BACKOFF_MS. */
const FIRST_BACKOFF_MS = 100;
const MAX_BACKOFF_MS = 2_000;

/** What happens to the server, for the log. */
export type EmbeddedEvent =
  | { event: 'exited'; pid: number; code: number | null; signal: NodeJS.Signals | null }
  | { event: 'restarted'; pid: number; downMs: number; attempts: number }
  | { event: 'restart-failed'; error: Error; attempt: number; retryInMs: number }
  | { event: 'gave-up'; error: Error; downMs: number };

export interface SupervisedServer {
  /** postgres://…?host=<socket folder> (secret), the same across restarts */
  url: string;
  /** the running postmaster's pid (it changes on a restart) */
  readonly pid: number;
  /** resolves when the server stays down past the bound; the server is not restarted after */
  failed: Promise<Error>;
  /** fast shutdown of the server, no restart; resolves when it has exited */
  stop(): Promise<void>;
}

export async function superviseServer(
  dataDir: string,
  options: {
    runtimeDir?: string | undefined;
    onOrphan?: (pid: number) => void;
    onEvent?: (event: EmbeddedEvent) => void;
    /** tests shorten it */
    restartBoundMs?: number;
  } = {},
): Promise<SupervisedServer> {
  const bound = options.restartBoundMs ?? RESTART_BOUND_MS;
  const socketFolder = createSocketFolder(dataDir, options.runtimeDir);
  let current: EmbeddedServer;
  try {
    current = await startServer(dataDir, {
      socketFolder,
      ...(options.onOrphan ? { onOrphan: options.onOrphan } : {}),
    });
  } catch (err) {
    rmSync(socketFolder, { recursive: true, force: true });
    throw err;
  }
  let stopping = false;
  let fail!: (err: Error) => void;
  const failed = new Promise<Error>((resolve) => (fail = resolve));
  let restarting: Promise<void> | undefined;

  const watch = (server: EmbeddedServer) => {
    void server.exited.then((exit: ServerExit) => {
      if (stopping) return;
      options.onEvent?.({ event: 'exited', pid: server.pid, ...exit });
      restarting = restart();
    });
  };

  const restart = async () => {
    const downSince = Date.now();
    let lastError: Error | undefined;
    let attempt = 0;
    for (;;) {
      attempt++;
      const delay = Math.min(FIRST_BACKOFF_MS * 2 ** (attempt - 1), MAX_BACKOFF_MS);
      await new Promise((r) => setTimeout(r, delay));
      if (stopping) return;
      const left = bound - (Date.now() - downSince);
      if (left > 0) {
        try {
          current = await startServer(dataDir, { socketFolder, readyTimeoutMs: left });
          break;
        } catch (err) {
          lastError = err instanceof Error ? err : new Error(String(err));
        }
      }
      const downMs = Date.now() - downSince;
      if (downMs >= bound) {
        const why = lastError?.message ?? 'no start was attempted in time';
        options.onEvent?.({ event: 'gave-up', error: lastError ?? new Error(why), downMs });
        fail(
          new Error(
            `the embedded database stopped and did not start again within ${Math.round(bound / 1000)} s: ${why}`,
          ),
        );
        return;
      }
      const retryInMs = Math.min(FIRST_BACKOFF_MS * 2 ** attempt, MAX_BACKOFF_MS);
      if (lastError)
        options.onEvent?.({ event: 'restart-failed', error: lastError, attempt, retryInMs });
    }
    if (stopping) {
      await current.stop();
      return;
    }
    options.onEvent?.({
      event: 'restarted',
      pid: current.pid,
      downMs: Date.now() - downSince,
      attempts: attempt,
    });
    watch(current);
  };

  watch(current);
  return {
    url: current.url,
    get pid() {
      return current.pid;
    },
    failed,
    async stop() {
      stopping = true;
      await restarting;
      try {
        await current.stop();
      } finally {
        rmSync(socketFolder, { recursive: true, force: true });
      }
    },
  };
}
