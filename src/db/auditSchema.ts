import {
  bigint,
  boolean,
  index,
  jsonb,
  pgTable,
  text,
  timestamp,
  uniqueIndex,
} from 'drizzle-orm/pg-core';

/**
 * Administrative changes, append-only: the application only inserts, and a trigger created by the
 * migration refuses UPDATE, DELETE and TRUNCATE. Summaries hold fingerprints, never key material.
 */
export const auditEvents = pgTable(
  'audit_events',
  {
    id: bigint('id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity(),
    /** the database clock, so events of several hosts order correctly */
    at: timestamp('at', { withTimezone: true }).notNull().defaultNow(),
    actor: text('actor').notNull(),
    /** `keys.create`, `allowlist.remove`...: see docs/audit.md */
    action: text('action').notNull(),
    target: text('target').notNull(),
    before: jsonb('before'),
    after: jsonb('after'),
    /**
     * The hash chain (migration 0021, docs/audit.md): the event's place (1, 2, 3... with no gap),
     * the SHA-256 of the event before it, and its own, over the RFC 8785 encoding of the event;
     * all three set by the database's insert trigger, never by attest's code.
     */
    seq: bigint('seq', { mode: 'number' }).notNull(),
    prevHash: text('prev_hash').notNull(),
    hash: text('hash').notNull(),
  },
  (t) => [
    index('audit_events_at_idx').on(t.at),
    index('audit_events_action_idx').on(t.action),
    uniqueIndex('audit_events_seq_idx').on(t.seq),
  ],
);

/**
 * One row: the chain's head (the last event's place and hash). The insert trigger locks it, so
 * events are chained one after the other even when several instances record at once.
 */
export const auditChain = pgTable('audit_chain', {
  id: boolean('id').primaryKey().default(true),
  seq: bigint('seq', { mode: 'number' }).notNull(),
  head: text('head').notNull(),
});
