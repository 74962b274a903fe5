import { sql } from 'drizzle-orm';
import { bigint, index, integer, pgTable, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';
import { bytea } from './bytea.js';

/**
 * Per-device verify counts (`--max-verifies-per-device`): one row per registered key (App Attest
 * or android-key) holding its current fixed window, rolled forward in place by the one upsert
 * that counts a verify. A key has one row whatever the number of windows it lived through, so
 * nothing is left to prune.
 */
export const deviceVelocity = pgTable(
  'device_velocity',
  {
    /** a service whose tokens name a device key (deviceKey in core/kinds.ts) */
    service: text('service').notNull(),
    keyId: bytea('key_id').notNull(),
    /** the mode of the API keys counted: live and test keys count apart */
    mode: text('mode').notNull().default('live'),
    /** the window's length when it was counted: another period starts the count again */
    periodSeconds: integer('period_seconds').notNull(),
    windowStart: timestamp('window_start', { withTimezone: true }).notNull(),
    /** accepted verifies in the window: never more than the limit (refused ones never count) */
    count: bigint('count', { mode: 'number' }).notNull(),
    /** the latest counted verify (the verifier's clock) */
    lastAt: timestamp('last_at', { withTimezone: true }).notNull(),
  },
  (t) => [
    primaryKey({ name: 'device_velocity_pkey', columns: [t.service, t.keyId, t.mode] }),
    // the test-state pruner (ATTEST_TEST_RETENTION) reads the test rows alone
    index('device_velocity_test_last_at_idx')
      .on(t.lastAt)
      .where(sql`mode = 'test'`),
  ],
);
