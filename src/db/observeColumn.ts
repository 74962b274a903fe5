import { sql, type SQL } from 'drizzle-orm';
import { observableCodes, type ObserveEntry } from '../core/observedRules.js';
import { textArray } from './textArray.js';

/**
 * A change of an entry's observed rules: `enforce` codes leave the set (`'all'`: every one), then
 * `observe` codes join it. Absent fields change nothing.
 */
export interface ObserveChange {
  observe?: string[];
  enforce?: string[] | 'all';
}

/** Whether the change touches the set at all. */
export function changesObserve(change: ObserveChange): boolean {
  return change.observe !== undefined || change.enforce !== undefined;
}

/**
 * The new `observe` column value as SQL, computed in the statement from `current` (the stored
 * column, or null for a new row) so that two changes at once both apply. Only codes observable for
 * `entry` survive, in the table's order, each once.
 */
export function observeValue(entry: ObserveEntry, current: SQL | null, change: ObserveChange): SQL {
  if (current && !changesObserve(change)) return current;
  const order = textArray(observableCodes(entry));
  const kept = change.enforce === 'all' || !current ? sql`'{}'::text[]` : current;
  const removed = change.enforce === 'all' ? undefined : change.enforce;
  return sql`(select coalesce(array_agg(c order by array_position(${order}, c)), '{}'::text[])
    from (select unnest(${kept}) as c except select unnest(${textArray(removed)})
          union select unnest(${textArray(change.observe)})) s
    where c = any(${order}))`;
}
