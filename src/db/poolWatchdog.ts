// postgres-js loads only where a PostgreSQL server is used (start-up time of the embedded database)
import type postgres from 'postgres';
import type { DatabaseHandle } from './client.js';

export interface PoolWatchdogOptions {
  /** backend deadlines within `windowMs` that make the pool suspect */
  threshold?: number;
  windowMs?: number;
  /** how long the probe on a fresh connection may take */
  probeTimeoutMs?: number;
  onRecycle?: () => void;
}

/**
 * Call the returned function whenever a request ran out of time waiting on the database. After
 * `threshold` such deadlines, it probes the database on a fresh connection; if that answers while
 * the pool does not, the pool's connections are dead without knowing it (postgres-js has no
 * client-side query timeout), and the pool is replaced. A database that is really down fails the
 * probe too, and the pool is left to reconnect by itself.
 */
export function createPoolWatchdog(
  handle: DatabaseHandle,
  options: PoolWatchdogOptions = {},
): () => void {
  const threshold = options.threshold ?? 3;
  const windowMs = options.windowMs ?? 10_000;
  const probeTimeoutMs = options.probeTimeoutMs ?? 3000;
  let recent: number[] = [];
  let probing = false;
  return () => {
    if (!handle.recycle || !handle.url || probing) return;
    const now = Date.now();
    recent = [...recent.filter((t) => now - t < windowMs), now];
    if (recent.length < threshold) return;
    probing = true;
    const url = handle.url;
    let probe: postgres.Sql | undefined;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('probe timed out')), probeTimeoutMs);
    });
    const answered = import('postgres').then(({ default: connect }) => {
      probe = connect(url, {
        max: 1,
        connect_timeout: Math.ceil(probeTimeoutMs / 1000),
        onnotice: () => {},
      });
      return probe`select 1`;
    });
    Promise.race([answered, timeout])
      .then(async () => {
        recent = [];
        options.onRecycle?.();
        await handle.recycle!();
      })
      .catch(() => {})
      .finally(() => {
        clearTimeout(timer);
        probing = false;
        probe?.end({ timeout: 0 }).catch(() => {});
      });
  };
}
