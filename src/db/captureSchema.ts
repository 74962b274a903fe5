import { boolean, index, integer, jsonb, pgTable, text, timestamp } from 'drizzle-orm/pg-core';
import { bytea } from './bytea.js';

/**
 * Tokens kept for replay (ATTEST_CAPTURE=rejected|all): each row is one verify, with what the
 * server knew when it answered (the final nonce, the instant, the API key's mode, id and scope,
 * the verdict and the policy entry as the audit trail summarises it), so `attest verify-file
 * --capture ID` can run it again. The token bytes are sealed (db/secrets.ts SEALED_TABLES): a
 * token is an RP's user's device evidence. Bounded per mode by ATTEST_CAPTURE_MAX (oldest first)
 * and by age (ATTEST_CAPTURE_RETENTION); never reachable over the RP API.
 */
export const tokenCaptures = pgTable(
  'token_captures',
  {
    id: text('id').primaryKey(),
    /** the verifier's clock at the verify: replays verify as of this instant */
    verifiedAt: timestamp('verified_at', { withTimezone: true }).notNull(),
    /** the API key's mode (test captures are bounded apart: they never push out live ones) */
    mode: text('mode').notNull(),
    apiKeyId: text('api_key_id').notNull(),
    /** the key's scope (`keys create --apps`); null: every allowlisted app */
    appScope: jsonb('app_scope').$type<string[] | null>(),
    /** the final nonce the token had to carry (serverNonce || deviceNonce, or expectedNonce) */
    nonce: bytea('nonce').notNull(),
    service: text('service'),
    /** App Attest app ID or Android package, as far as the verifier read it */
    app: text('app'),
    valid: boolean('valid').notNull(),
    reason: text('reason'),
    detail: text('detail'),
    checks: jsonb('checks').notNull(),
    /** the app's allowlist entry as the audit trail summarises it (no secrets); null: none */
    policy: jsonb('policy'),
    /** the token's CBOR, sealed under the master key */
    token: bytea('token').notNull(),
    /** the token's size in clear: what ATTEST_CAPTURE_MAX's byte bound counts */
    tokenBytes: integer('token_bytes').notNull(),
    masterKeyId: text('master_key_id'),
  },
  (t) => [
    index('token_captures_mode_verified_at_idx').on(t.mode, t.verifiedAt),
    index('token_captures_verified_at_idx').on(t.verifiedAt),
  ],
);
