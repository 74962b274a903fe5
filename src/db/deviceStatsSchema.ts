import { index, pgTable, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';

/**
 * The devices behind the verification statistics, for the rollout's distinct-device counts: one
 * row per day, app, mode, service, device and outcome ('' = a valid verify, else the observed
 * rule's reason code that the valid verify failed), with the last time it was seen that day. A
 * device is the SHA-256 of the service and the key the evidence names (App Attest key id,
 * android-key key id), cut to 128 bits: never the raw id. Play Integrity names no device. Every
 * write is an idempotent upsert (a retried batch changes nothing); pruned with the counts.
 */
export const verificationDevices = pgTable(
  'verification_devices',
  {
    /** the start of the UTC day */
    day: timestamp('day', { withTimezone: true }).notNull(),
    app: text('app').notNull(),
    /** the API key's mode: 'live' | 'test' */
    mode: text('mode').notNull(),
    service: text('service').notNull(),
    /** 32 hex digits */
    device: text('device').notNull(),
    /** '' for a valid verify; the reason code of an observed rule it failed */
    reason: text('reason').notNull(),
    lastAt: timestamp('last_at', { withTimezone: true }).notNull(),
  },
  (t) => [
    primaryKey({
      name: 'verification_devices_pk',
      columns: [t.day, t.app, t.reason, t.mode, t.service, t.device],
    }),
    index('verification_devices_last_at_idx').on(t.lastAt),
  ],
);
