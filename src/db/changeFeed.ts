import { boundedDb, type DatabaseHandle } from './database.js';
import { fixedStatement } from './fixedStatement.js';

/** The channel the change_notify triggers announce on (payload: the table's name). */
export const CHANGES_CHANNEL = 'attest_changes';

/** a poll every second: a change reaches every instance within about a second, one query each */
export const POLL_INTERVAL_MS = 1000;

/** What an instance does with changes made elsewhere. */
export interface ChangeListener {
  /** a change of `table` was committed */
  onChange(table: string): void;
  /** changes may have been missed (the feed started, or came back after a failure): reload all */
  onResync(): void;
}

export interface ChangeFeed {
  mode: 'notify' | 'poll';
  stop(): Promise<void>;
}

const latestVersion = fixedStatement<{ version: string | number }>(
  'select version from attest_change_version',
);
// the primary key's index: one range scan of the few rows above `version`
const changesSince = fixedStatement<{ version: string | number; table_name: string }>(
  'select version, table_name from attest_changes where version > $1 order by version limit 1000',
);

/**
 * Tells `listener` of every change committed anywhere: by LISTEN where connections keep their
 * session (the handle's plan), else by polling attest_changes every `intervalMs`. Either way
 * `onResync` is called once the feed is in place, and again after any gap.
 * @param onPollError told of the first failed poll of an outage (the next good poll resyncs)
 */
export async function startChangeFeed(
  handle: DatabaseHandle,
  listener: ChangeListener,
  options: { intervalMs?: number; onPollError?: (err: unknown) => void } = {},
): Promise<ChangeFeed | null> {
  const mode = handle.connections?.feed ?? 'notify';
  if (mode === 'notify') {
    if (!handle.listen) return null;
    await handle.listen(CHANGES_CHANNEL, listener.onChange, listener.onResync);
    // the LISTEN connection ends with the handle
    return { mode, stop: async () => {} };
  }
  const intervalMs = options.intervalMs ?? POLL_INTERVAL_MS;
  // a poll that hangs must not stop the next: each is bounded by the interval's length at least
  const deadlineMs = Math.max(intervalMs, 2000);
  const db = boundedDb(handle, deadlineMs);
  let seen = Number((await latestVersion(db, []))[0]?.version ?? 0);
  listener.onResync();
  let failing = false;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  const poll = async () => {
    try {
      const rows = await changesSince(db, [seen]);
      if (failing) {
        failing = false;
        listener.onResync();
      }
      if (rows.length === 0) return;
      seen = Number(rows[rows.length - 1]!.version);
      for (const table of new Set(rows.map((r) => r.table_name))) listener.onChange(table);
    } catch (err) {
      if (!failing) options.onPollError?.(err);
      failing = true;
    }
  };
  // the next poll is scheduled `intervalMs` after one ends: never two at once, never more than
  // one per interval however late the event loop runs a timer or the database answers
  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(() => {
      running = poll().finally(schedule);
    }, intervalMs);
    timer.unref();
  };
  schedule();
  return {
    mode,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
