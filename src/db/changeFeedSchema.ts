import { bigint, boolean, pgTable, text, timestamp } from 'drizzle-orm/pg-core';

/**
 * The change feed's log: one row per announced change (the change_notify triggers), numbered by
 * `version` in commit order. Instances that cannot LISTEN (behind a pooler in transaction mode)
 * poll it for versions above the last they saw; the trigger keeps the latest 1000 rows.
 */
export const attestChanges = pgTable('attest_changes', {
  version: bigint('version', { mode: 'number' }).primaryKey(),
  tableName: text('table_name').notNull(),
  at: timestamp('at', { withTimezone: true }).notNull().defaultNow(),
});

/**
 * One row: the last version given. The trigger raises it with a row lock held to commit, so
 * versions commit in order and a poller that saw version n has seen every change up to n.
 */
export const attestChangeVersion = pgTable('attest_change_version', {
  id: boolean('id').primaryKey().default(true),
  version: bigint('version', { mode: 'number' }).notNull(),
});
