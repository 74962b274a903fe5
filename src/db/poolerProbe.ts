import { randomBytes } from 'node:crypto';
import type postgres from 'postgres';
import type { Sql } from 'postgres';
import { isConnectionError } from './errors.js';

/** What a server process found out about its connections before it opened its pool. */
export interface PoolerTraits {
  /**
   * The server took `statement_timeout` as a startup parameter. PgBouncer (any pool mode) refuses
   * the connection instead ("unsupported startup parameter"): the pool then connects without it.
   */
  startupParameters: boolean;
  /**
   * A NOTIFY sent on one connection reached a LISTEN on another: connections keep their session
   * (no pooler, or one in session mode). A pooler in transaction mode hands each transaction to
   * any server connection, so a LISTEN, a session advisory lock or a named prepared statement is
   * left on a connection this process no longer holds. Undefined when not probed.
   */
  notify?: boolean;
}

/** how long a NOTIFY may take to come back before the connections are taken for pooled */
export const NOTIFY_PROBE_MS = 2000;

const PROBE_CHANNEL = 'attest_pooler_probe';

type Connect = (options: postgres.Options<Record<string, never>>) => Sql;

/**
 * Finds the traits above with connections of its own, outside the pool (all ended before it
 * answers). A server that cannot be reached throws the driver's error (isConnectionError); any
 * other failure answers null, and the caller proceeds as without a pooler.
 * @param connect postgres.js with the URL, host and timeouts already given
 * @param notify whether to send the NOTIFY round trip (ATTEST_CHANGE_FEED=auto only)
 */
export async function probePooler(
  connect: Connect,
  notify: boolean,
  waitMs = NOTIFY_PROBE_MS,
): Promise<PoolerTraits | null> {
  const nonce = randomBytes(12).toString('hex');
  let heard: () => void = () => {};
  const arrived = new Promise<void>((resolve) => (heard = resolve));
  const single = (startupTimeout: boolean, name: string) =>
    connect({
      max: 1,
      // unnamed statements and no type query: nothing here depends on the session surviving
      prepare: false,
      fetch_types: false,
      onnotice: () => {},
      connection: {
        application_name: name,
        ...(startupTimeout ? { statement_timeout: 5000 } : {}),
      },
    });
  const opened: Sql[] = [];
  try {
    let startupParameters = true;
    let listener = single(true, 'attest-probe');
    opened.push(listener);
    try {
      await listener`select 1`;
    } catch (err) {
      if (!refusedStartupParameter(err)) throw err;
      startupParameters = false;
      listener = single(false, 'attest-probe');
      opened.push(listener);
      await listener`select 1`;
    }
    if (!notify) return { startupParameters };
    try {
      await listener.listen(PROBE_CHANNEL, (payload) => payload === nonce && heard());
    } catch (err) {
      // a server that refuses LISTEN itself (CockroachDB) cannot announce anything
      if (isConnectionError(err)) throw err;
      return { startupParameters, notify: false };
    }
    const sender = single(startupParameters, 'attest-probe');
    opened.push(sender);
    await sender`select pg_notify(${PROBE_CHANNEL}, ${nonce})`;
    let timer: NodeJS.Timeout | undefined;
    const came = await Promise.race([
      arrived.then(() => true),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), waitMs))),
    ]);
    clearTimeout(timer);
    return { startupParameters, notify: came };
  } catch (err) {
    // an unreachable server is the caller's error at once, not again after its own timeout
    if (isConnectionError(err)) throw err;
    return null;
  } finally {
    for (const sql of opened) sql.end({ timeout: 0 }).catch(() => {});
  }
}

/** PgBouncer's answer to a startup parameter it does not pass on (protocol_violation). */
export function refusedStartupParameter(err: unknown): boolean {
  return err instanceof Error && /unsupported startup parameter/i.test(err.message);
}

/** ATTEST_CHANGE_FEED: how changes made elsewhere reach a server process. */
export type ChangeFeedSetting = 'notify' | 'poll' | 'auto';

/** How a process uses its connections, decided once before its pool opens. */
export interface ConnectionPlan {
  /** `notify`: LISTEN on a connection of its own; `poll`: read attest_changes every second */
  feed: 'notify' | 'poll';
  /** why that feed, for the start-up log */
  why: string;
  /** statement_timeout is sent at connection start (the server role, when the server takes it) */
  startupTimeout: boolean;
  /**
   * Connections do not keep their session (a pooler in transaction mode, as the failed NOTIFY
   * round trip or ATTEST_CHANGE_FEED=poll says): unnamed statements, one in flight per connection
   * (transactionPooling.ts). One path: true exactly when the feed polls.
   */
  transactionPooled: boolean;
}

/**
 * The plan of a server process on PostgreSQL: probes the connections (the NOTIFY round trip only
 * for `auto`) and follows the setting where one is given.
 */
export async function planConnections(
  connect: Connect,
  setting: ChangeFeedSetting,
  waitMs = NOTIFY_PROBE_MS,
): Promise<ConnectionPlan> {
  const traits = await probePooler(connect, setting === 'auto', waitMs);
  const startupTimeout = traits?.startupParameters ?? true;
  let feed: 'notify' | 'poll';
  let why: string;
  if (setting !== 'auto') {
    feed = setting;
    why = `ATTEST_CHANGE_FEED=${setting}`;
  } else if (traits?.notify === false) {
    feed = 'poll';
    why = `a NOTIFY sent on one connection did not reach a LISTEN on another within ${waitMs / 1000} s: connections do not keep their session (a pooler in transaction mode), or the server has no LISTEN`;
  } else {
    feed = 'notify';
    why = traits ? 'a NOTIFY reached a LISTEN on another connection' : 'the probe failed';
  }
  return { feed, why, startupTimeout, transactionPooled: feed === 'poll' };
}
