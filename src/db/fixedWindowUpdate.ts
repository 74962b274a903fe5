/**
 * The update half of a fixed-window counter's `INSERT ... ON CONFLICT DO UPDATE` (per-device
 * verifies, new keys per issuing certificate): the row of alias `d` counts one more in its window,
 * or starts a new window (a later one, or one of another length) at 1; a window never moves back;
 * a full window (count at the limit, parameter `$limit`, null for none) is left as it is and
 * returns no row. One statement: exact with many requests and instances at once.
 */
export function fixedWindowUpdate(limitParam: number): string {
  const sameWindow =
    'd.period_seconds = excluded.period_seconds and d.window_start >= excluded.window_start';
  return `do update set
    count = case when ${sameWindow} then d.count + 1 else 1 end,
    window_start = case when ${sameWindow} then d.window_start else excluded.window_start end,
    period_seconds = excluded.period_seconds,
    last_at = greatest(d.last_at, excluded.last_at)
  where not (${sameWindow} and d.count >= coalesce($${limitParam}::bigint, 9223372036854775807))`;
}
