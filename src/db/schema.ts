import { sql } from 'drizzle-orm';
import {
  bigint,
  boolean,
  customType,
  index,
  integer,
  pgTable,
  primaryKey,
  text,
  timestamp,
} from 'drizzle-orm/pg-core';

/** bytea as Uint8Array on both drivers (postgres-js gives Buffer, a Uint8Array subclass). */
const bytea = customType<{ data: Uint8Array; driverData: Uint8Array }>({
  dataType: () => 'bytea',
});

const createdAt = () => timestamp('created_at', { withTimezone: true }).notNull().defaultNow();

export const apiKeys = pgTable('api_keys', {
  /** the lookup id embedded in the key (`<prefix>_<id><secret>`) */
  id: text('id').primaryKey(),
  name: text('name').notNull(),
  /** argon2id PHC string of the whole key */
  hash: text('hash').notNull(),
  createdAt: createdAt(),
  lastUsedAt: timestamp('last_used_at', { withTimezone: true }),
  expiresAt: timestamp('expires_at', { withTimezone: true }),
  revokedAt: timestamp('revoked_at', { withTimezone: true }),
});

export const attestationSessions = pgTable(
  'attestation_sessions',
  {
    reference: text('reference').primaryKey(),
    apiKeyId: text('api_key_id')
      .notNull()
      .references(() => apiKeys.id, { onDelete: 'cascade' }),
    serverNonce: bytea('server_nonce').notNull(),
    createdAt: createdAt(),
    expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
    consumedAt: timestamp('consumed_at', { withTimezone: true }),
  },
  (t) => [index('attestation_sessions_expires_at_idx').on(t.expiresAt)],
);

export const appleApps = pgTable('apple_apps', {
  appId: text('app_id').primaryKey(),
  /** 'production' | 'development' | 'any' */
  env: text('env').notNull(),
  createdAt: createdAt(),
});

export const androidPackages = pgTable('android_packages', {
  packageName: text('package_name').primaryKey(),
  /** hex SHA-256 digests of allowed signing certificates; empty = not checked */
  certificateDigests: text('certificate_digests')
    .array()
    .notNull()
    .default(sql`'{}'::text[]`),
  minVerdict: text('min_verdict').notNull().default('MEETS_DEVICE_INTEGRITY'),
  allowUnrecognized: boolean('allow_unrecognized').notNull().default(false),
  maxAgeSeconds: integer('max_age_seconds').notNull().default(600),
  /** newer verdicts: empty lists and null mean "not checked" */
  requireLicensed: boolean('require_licensed').notNull().default(false),
  playProtectVerdicts: text('play_protect_verdicts')
    .array()
    .notNull()
    .default(sql`'{}'::text[]`),
  denyAppAccessRisk: text('deny_app_access_risk')
    .array()
    .notNull()
    .default(sql`'{}'::text[]`),
  maxDeviceActivity: text('max_device_activity'),
  /** service-account key (JSON) for standard requests: a secret, read and written only by src/db/allowlist.ts */
  serviceAccount: text('service_account'),
  createdAt: createdAt(),
});

export const androidKeyPairs = pgTable(
  'android_key_pairs',
  {
    packageName: text('package_name')
      .notNull()
      .references(() => androidPackages.packageName, { onDelete: 'cascade' }),
    /** fingerprint of the pair, shown by `allowlist list` and used to retire it */
    id: text('id').notNull(),
    decryptionKey: bytea('decryption_key').notNull(),
    verificationKey: bytea('verification_key').notNull(),
    createdAt: createdAt(),
  },
  (t) => [primaryKey({ columns: [t.packageName, t.id] })],
);

export const appleKeys = pgTable('apple_keys', {
  keyId: bytea('key_id').primaryKey(),
  publicKey: bytea('public_key').notNull(),
  appId: text('app_id').notNull(),
  /** 'Development' | 'Production' */
  environment: text('environment').notNull(),
  /** highest assertion counter accepted; uint32 fits a bigint */
  counter: bigint('counter', { mode: 'number' }).notNull(),
  createdAt: createdAt(),
  lastUsedAt: timestamp('last_used_at', { withTimezone: true }),
});
