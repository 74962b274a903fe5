import { DatabaseUnavailableError, isConnectionError } from './errors.js';

export interface DatabaseBreakerOptions {
  /** rejects when the database cannot be reached (DatabaseHandle.probe: a fresh connection) */
  probe(timeoutMs: number): Promise<void>;
  /** how long one probe may take (default 1000 ms, lag-aware in DatabaseHandle.probe) */
  probeTimeoutMs?: number;
  /** while open, the wait between the end of one probe and the next (default 200 ms) */
  retryMs?: number;
  /** while closed, the least time between two probes that suspicion starts (default 500 ms) */
  suspectIntervalMs?: number;
  /** told of each change: `open` true when the database became unreachable, with the probe's error */
  onChange?(open: boolean, cause?: unknown): void;
}

export interface DatabaseBreaker {
  /** true while the last probe failed: database work fails at once instead of waiting */
  isOpen(): boolean;
  /** throws DatabaseUnavailableError while open */
  check(): void;
  /** a database call failed: a connection error has the database probed at once */
  failed(err: unknown): void;
  /** a database call is slow or timed out: the database is probed (one probe at a time) */
  suspect(): void;
  /** calls `listener` the next times the breaker opens, until the returned function is called */
  onOpen(listener: () => void): () => void;
  /** stops probing (shutdown) */
  stop(): void;
}

/**
 * A circuit breaker on the database. Closed, it costs nothing; a connection error or a slow call
 * has the database probed on a fresh connection, and a failed probe opens it. Open, `check`
 * throws at once (requests answer in microseconds, not after the request deadline), waiters
 * registered with `onOpen` are released, and a probe runs every `retryMs` until one answers,
 * which closes it. Only a probe opens or closes it: a slow request (a saturated event loop) never
 * does by itself.
 */
export function createDatabaseBreaker(options: DatabaseBreakerOptions): DatabaseBreaker {
  const probeTimeoutMs = options.probeTimeoutMs ?? 1000;
  const retryMs = options.retryMs ?? 200;
  const suspectIntervalMs = options.suspectIntervalMs ?? 500;
  let open = false;
  let probing = false;
  let stopped = false;
  let lastProbeAt = -Infinity;
  let retry: NodeJS.Timeout | undefined;
  const listeners = new Set<() => void>();

  const probeNow = () => {
    if (probing || stopped) return;
    probing = true;
    lastProbeAt = performance.now();
    options.probe(probeTimeoutMs).then(
      () => {
        probing = false;
        if (!open || stopped) return;
        open = false;
        options.onChange?.(false);
      },
      (err: unknown) => {
        probing = false;
        if (stopped) return;
        if (!open) {
          open = true;
          options.onChange?.(true, err);
          for (const listener of [...listeners]) listener();
        }
        retry = setTimeout(probeNow, retryMs);
        retry.unref();
      },
    );
  };

  return {
    isOpen: () => open,
    check() {
      if (open) throw new DatabaseUnavailableError('the database cannot be reached');
    },
    failed(err) {
      if (isConnectionError(err)) this.suspect();
    },
    suspect() {
      if (!open && performance.now() - lastProbeAt >= suspectIntervalMs) probeNow();
    },
    onOpen(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    stop() {
      stopped = true;
      clearTimeout(retry);
    },
  };
}
