import {
  bigint,
  customType,
  integer,
  pgTable,
  primaryKey,
  text,
  timestamp,
} from 'drizzle-orm/pg-core';

const bytea = customType<{ data: Uint8Array; driverData: Uint8Array }>({
  dataType: () => 'bytea',
});

/**
 * New android-key keys per issuing certificate (`allowlist add android --max-keys-per-issuer
 * N/WINDOW`, the leaked-keybox defence): one row per package, issuing certificate and API key
 * mode, holding its current fixed window, rolled forward in place by the one upsert that counts a
 * registration (as device_velocity does for verifies).
 */
export const androidIssuerVelocity = pgTable(
  'android_issuer_velocity',
  {
    packageName: text('package_name').notNull(),
    /** SHA-256 of the issuing certificate's DER */
    issuer: bytea('issuer').notNull(),
    /** live and test keys count apart: a test key's registrations never count for live keys */
    mode: text('mode').notNull().default('live'),
    periodSeconds: integer('period_seconds').notNull(),
    windowStart: timestamp('window_start', { withTimezone: true }).notNull(),
    /** new keys counted in the window (enforced: never more than N; observed: all of them) */
    count: bigint('count', { mode: 'number' }).notNull(),
    /** the issuing certificate's serial (hex) and subject, for `attest stats` and the blocklist */
    serial: text('serial').notNull(),
    subject: text('subject').notNull(),
    lastAt: timestamp('last_at', { withTimezone: true }).notNull(),
  },
  (t) => [
    primaryKey({
      name: 'android_issuer_velocity_pkey',
      columns: [t.packageName, t.issuer, t.mode],
    }),
  ],
);

/**
 * Issuing certificates this deployment refuses (`attest allowlist android-issuers block SERIAL`):
 * a leaked keybox found before Google lists it. A registration whose issuing certificate has one
 * of these serials is refused as android_chain_revoked. Each block and unblock is an audit event.
 */
export const androidIssuerBlocks = pgTable('android_issuer_blocks', {
  /** lowercase hex without leading zeros, as normalizeSerial writes it */
  serial: text('serial').primaryKey(),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
});
