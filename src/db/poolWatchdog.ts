import { sql } from 'drizzle-orm';
import type { DatabaseHandle } from './database.js';
import { isDatabaseTimeout } from './databaseDeadline.js';
import { lagAwareDeadline, LagAwareTimeoutError } from './lagAwareDeadline.js';

/**
 * What the watchdog concluded after a suspicion: `pool answers` (in time, if only with an error),
 * `busy` (the pool was slow while the event loop was blocked: this process is saturated, the
 * connections are not to blame), `down` (a fresh connection fails too: the database is down, and
 * the breaker handles that), `awaiting standby` (the server holds attest's commits until a
 * synchronous standby confirms them: the pool is not to blame and is kept), `recycled` (the pool
 * hung while a fresh connection answered).
 */
export type WatchdogVerdict = 'pool answers' | 'busy' | 'down' | 'awaiting standby' | 'recycled';

export interface PoolWatchdogOptions {
  /** backend deadlines within `windowMs` that make the pool suspect */
  threshold?: number;
  windowMs?: number;
  /** how long the pool, then a fresh connection, may take to answer `select 1` */
  probeTimeoutMs?: number;
  /** a longest event-loop delay above this during the pool's probe makes the verdict `busy` */
  busyLoopMs?: number;
  onRecycle?: () => void;
  /** told each verdict (logs, tests) */
  onVerdict?: (verdict: WatchdogVerdict) => void;
}

/**
 * Call the returned function whenever a request ran out of time waiting on the database. A request
 * deadline alone proves nothing (a saturated event loop misses deadlines with a healthy pool), so
 * after `threshold` of them the watchdog judges by probes: `select 1` through the pool, within a
 * lag-aware deadline, while the event loop's delay is measured. The pool is replaced only when it
 * did not answer, or statements timed out (DatabaseTimeoutError: lag-aware, so not a blocked loop)
 * even though it answers, the loop was not blocked meanwhile, and a fresh connection answers: its
 * connections are then dead without knowing it (postgres-js has no client-side query timeout).
 */
export function createPoolWatchdog(
  handle: DatabaseHandle,
  options: PoolWatchdogOptions = {},
): (cause?: unknown) => void {
  const threshold = options.threshold ?? 3;
  const windowMs = options.windowMs ?? 10_000;
  const probeTimeoutMs = options.probeTimeoutMs ?? 3000;
  const busyLoopMs = options.busyLoopMs ?? 200;
  let recent: { at: number; statement: boolean }[] = [];
  let judging = false;

  const judge = async (statementsTimedOut: boolean): Promise<WatchdogVerdict> => {
    const loop = watchLoopDelay();
    const pool = handle.db.execute(sql`select 1`);
    // left behind when it hangs: its rejection (a recycle ends it) is nobody's error
    pool.catch(() => {});
    let answered = false;
    try {
      await lagAwareDeadline(pool, probeTimeoutMs);
      answered = true;
    } catch (err) {
      // an error is an answer: postgres-js reconnects a connection that failed by itself
      if (!(err instanceof LagAwareTimeoutError)) answered = true;
    } finally {
      loop.stop();
    }
    // statements that timed out (lag-aware) sat on connections that did not answer: one hung
    // connection among live ones lets the pool's probe pass and keeps wedging what lands on it
    if (answered && !statementsTimedOut) return 'pool answers';
    if (loop.maxMs() > busyLoopMs) return 'busy';
    try {
      await handle.probe!(probeTimeoutMs);
    } catch {
      return 'down';
    }
    // a promoted standby whose synchronous_standby_names names a standby not (yet) connected: its
    // commits wait, and a new pool would only leave more server processes waiting (until the
    // server refuses every connection, its failover manager's included: SQLSTATE 53300)
    const waiting = await handle.commitsAwaitingStandby?.(probeTimeoutMs).catch(() => 0);
    if (waiting) return 'awaiting standby';
    options.onRecycle?.();
    await handle.recycle!();
    return 'recycled';
  };

  return (cause) => {
    if (!handle.recycle || !handle.probe || judging) return;
    const now = Date.now();
    recent = [
      ...recent.filter((t) => now - t.at < windowMs),
      { at: now, statement: isDatabaseTimeout(cause) },
    ];
    if (recent.length < threshold) return;
    const statementsTimedOut = recent.some((t) => t.statement);
    recent = [];
    judging = true;
    judge(statementsTimedOut)
      .catch((): WatchdogVerdict => 'down')
      .then((verdict) => {
        judging = false;
        options.onVerdict?.(verdict);
      });
  };
}

const TICK_MS = 20;

/**
 * The longest delay of a 20 ms ticker from now on: how long the event loop was blocked at most.
 * (perf_hooks' monitorEventLoopDelay misses a block that starts in the turn it is enabled in.)
 */
function watchLoopDelay(): { maxMs(): number; stop(): void } {
  let last = performance.now();
  let max = 0;
  const tick = () => {
    const now = performance.now();
    max = Math.max(max, now - last - TICK_MS);
    last = now;
  };
  const ticker = setInterval(tick, TICK_MS);
  return {
    maxMs: () => max,
    stop() {
      tick();
      clearInterval(ticker);
    },
  };
}
