import { sql } from 'drizzle-orm';
import { DEFAULT_ANDROID_POLICY } from '../core/gms/defaultAndroidPolicy.js';
import {
  bigint,
  boolean,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
} from 'drizzle-orm/pg-core';

import { bytea } from './bytea.js';

// the audit trail's, statistics', change feed's and velocity tables are in the *Schema.ts modules
// beside this one; tables.ts gathers them all for drizzle's client

const createdAt = () => timestamp('created_at', { withTimezone: true }).notNull().defaultNow();

export const apiKeys = pgTable('api_keys', {
  /** the lookup id embedded in the key (`<prefix>_<id><secret>`) */
  id: text('id').primaryKey(),
  name: text('name').notNull(),
  /** argon2id PHC string of the whole key */
  hash: text('hash').notNull(),
  /**
   * `hs256$<salt>$<mac>` (core/apiKeys.ts apiKeyCheck): refuses a wrong secret before argon2 and
   * before any failure budget. Null for keys made before it: set by their next verification.
   */
  precheck: text('precheck'),
  createdAt: createdAt(),
  lastUsedAt: timestamp('last_used_at', { withTimezone: true }),
  expiresAt: timestamp('expires_at', { withTimezone: true }),
  revokedAt: timestamp('revoked_at', { withTimezone: true }),
  /** 'live' | 'test': test keys also trust the deployment's development roots */
  mode: text('mode').notNull().default('live'),
  /** valid verifies of this key carry a signed result token (`keys create --result-tokens`) */
  resultTokens: boolean('result_tokens').notNull().default(false),
  /** rejections answered with their reason (and Play remediation) (`keys create --rejection-details`) */
  rejectionDetails: boolean('rejection_details').notNull().default(false),
  /**
   * the App Attest app IDs and Android packages the key may verify (`keys create --apps`); null:
   * every allowlisted app (keys made before scopes, and keys without `--apps`)
   */
  apps: text('apps').array(),
});

/**
 * Per API key, the client address prefixes (IPv4 address, IPv6 /64) it authenticated from
 * recently: shared by every instance, so a fresh one still tells the key's owner from an attacker
 * who only knows the (public) key id. Refreshed at most every few minutes per prefix.
 */
export const apiKeyOrigins = pgTable(
  'api_key_origins',
  {
    apiKeyId: text('api_key_id')
      .notNull()
      .references(() => apiKeys.id, { onDelete: 'cascade' }),
    prefix: text('prefix').notNull(),
    lastSeenAt: timestamp('last_seen_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.apiKeyId, t.prefix] })],
);

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
  // both indexes serve the pruner's batches
  (t) => [
    index('attestation_sessions_expires_at_idx').on(t.expiresAt),
    index('attestation_sessions_consumed_at_idx').on(t.consumedAt),
  ],
);

/**
 * The result tokens consumed through `POST /api/v1/results/consume`: a `jti` is recorded once,
 * by one INSERT ... ON CONFLICT DO NOTHING, and kept until the token's `exp` plus an hour (the
 * pruner), past which the token no longer verifies anyway.
 */
export const consumedResults = pgTable(
  'consumed_results',
  {
    jti: text('jti').primaryKey(),
    /** the token's `exp` */
    expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
    /**
     * the API key that consumed it first. No foreign key on purpose: deleting that key must not
     * delete the record, or the token could be consumed again with another key
     */
    apiKeyId: text('api_key_id').notNull(),
    consumedAt: timestamp('consumed_at', { withTimezone: true }).notNull().defaultNow(),
  },
  // the pruner's batches
  (t) => [index('consumed_results_expires_at_idx').on(t.expiresAt)],
);

export const appleApps = pgTable('apple_apps', {
  appId: text('app_id').primaryKey(),
  /** 'production' | 'development' | 'any' */
  env: text('env').notNull(),
  createdAt: createdAt(),
  /** a registration without a valid receipt is rejected (apple_receipt_invalid) */
  requireReceipt: boolean('require_receipt').notNull().default(false),
  /** assertions from keys whose latest risk metric is above this are rejected; null = not checked */
  maxRiskMetric: integer('max_risk_metric'),
  /** accepted iOS 27 validation categories; empty = not checked */
  validationCategories: text('validation_categories')
    .array()
    .notNull()
    .default(sql`'{}'::text[]`),
  /** lowest accepted bundle version (dotted numbers); null = not checked */
  minBundleVersion: text('min_bundle_version'),
  /** tokens without the iOS 27 extensions pass the two rules above */
  allowMissingValidationCategory: boolean('allow_missing_validation_category')
    .notNull()
    .default(false),
  /** accepted platforms ('ios', 'macos'); empty = every platform */
  platforms: text('platforms')
    .array()
    .notNull()
    .default(sql`'{}'::text[]`),
  /** observed rules: reason codes whose failures are recorded but do not reject */
  observe: text('observe')
    .array()
    .notNull()
    .default(sql`'{}'::text[]`),
  /** `--max-verifies-per-device N/PERIOD`: N, with the window in seconds; both null = not counted */
  maxVerifiesPerDevice: integer('max_verifies_per_device'),
  deviceWindowSeconds: integer('device_window_seconds'),
});

export const androidPackages = pgTable('android_packages', {
  packageName: text('package_name').primaryKey(),
  /** hex SHA-256 digests of allowed signing certificates; empty = not checked */
  certificateDigests: text('certificate_digests')
    .array()
    .notNull()
    .default(sql`'{}'::text[]`),
  minVerdict: text('min_verdict').notNull().default(DEFAULT_ANDROID_POLICY.minVerdict),
  allowUnrecognized: boolean('allow_unrecognized')
    .notNull()
    .default(DEFAULT_ANDROID_POLICY.allowUnrecognized),
  maxAgeSeconds: integer('max_age_seconds').notNull().default(DEFAULT_ANDROID_POLICY.maxAgeSeconds),
  /** newer verdicts: empty lists and null mean "not checked" */
  requireLicensed: boolean('require_licensed')
    .notNull()
    .default(DEFAULT_ANDROID_POLICY.requireLicensed),
  playProtectVerdicts: text('play_protect_verdicts')
    .array()
    .notNull()
    .default(sql`'{}'::text[]`),
  denyAppAccessRisk: text('deny_app_access_risk')
    .array()
    .notNull()
    .default(sql`'{}'::text[]`),
  maxDeviceActivity: text('max_device_activity'),
  /** Play device recall bits ('first', 'second', 'third') that reject a token when set; empty = not checked */
  denyRecallBits: text('deny_recall_bits')
    .array()
    .notNull()
    .default(sql`'{}'::text[]`),
  /** lowest accepted Play account activity level; null = not checked */
  minAccountActivity: text('min_account_activity'),
  /** location spoofing risk values that reject a token; empty = not checked */
  denyLocationSpoofing: text('deny_location_spoofing')
    .array()
    .notNull()
    .default(sql`'{}'::text[]`),
  /** the package's Google service-account JSON, sealed under the master key; secret */
  serviceAccount: bytea('service_account'),
  serviceAccountKeyId: text('service_account_key_id'),
  /** `<client email> spki-sha256:<hex>` of the stored service account: what the audit trail shows of it */
  serviceAccountFingerprint: text('service_account_fingerprint'),
  /** hardware key attestation (`android-key`): off unless the operator turns it on */
  keyAttestation: boolean('key_attestation')
    .notNull()
    .default(DEFAULT_ANDROID_POLICY.keyAttestation),
  /** 'TrustedEnvironment' | 'StrongBox' */
  minSecurityLevel: text('min_security_level')
    .notNull()
    .default(DEFAULT_ANDROID_POLICY.minSecurityLevel),
  allowUnlocked: boolean('allow_unlocked').notNull().default(DEFAULT_ANDROID_POLICY.allowUnlocked),
  /** hex verifiedBootKey values of self-signed OS builds the package trusts */
  bootKeys: text('boot_keys')
    .array()
    .notNull()
    .default(sql`'{}'::text[]`),
  /** null = patch level not checked */
  maxPatchAgeMonths: integer('max_patch_age_months'),
  /** observed rules (gms and android-key): reason codes whose failures are recorded but do not reject */
  observe: text('observe')
    .array()
    .notNull()
    .default(sql`'{}'::text[]`),
  /** android-key `--max-verifies-per-device N/PERIOD`: N, with the window in seconds; both null = not counted */
  maxVerifiesPerDevice: integer('max_verifies_per_device'),
  deviceWindowSeconds: integer('device_window_seconds'),
  /** android-key `--max-keys-per-issuer N/WINDOW` as `N/SECONDS`; null = not counted */
  maxKeysPerIssuer: text('max_keys_per_issuer'),
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
    /** both keys sealed by secretBox (a null master_key_id: a row in clear, from 0.1, sealed by the migration path) */
    decryptionKey: bytea('decryption_key').notNull(),
    verificationKey: bytea('verification_key').notNull(),
    masterKeyId: text('master_key_id'),
    /** made by `attest dev mint gms`: tried for test API keys only */
    testOnly: boolean('test_only').notNull().default(false),
    /** test-only pairs: PKCS#8 DER of the P-256 key that signs minted tokens (Google's half); secret */
    signingKey: bytea('signing_key'),
    createdAt: createdAt(),
  },
  (t) => [
    primaryKey({ columns: [t.packageName, t.id] }),
    // one test-only pair per package, even when two first mints race
    uniqueIndex('android_key_pairs_one_test_pair')
      .on(t.packageName)
      .where(sql`test_only`),
  ],
);

export const appleKeys = pgTable(
  'apple_keys',
  {
    keyId: bytea('key_id').notNull(),
    publicKey: bytea('public_key').notNull(),
    appId: text('app_id').notNull(),
    /** 'Development' | 'Production' */
    environment: text('environment').notNull(),
    /** highest assertion counter accepted; uint32 fits a bigint */
    counter: bigint('counter', { mode: 'number' }).notNull(),
    /**
     * mode of the API key that registered it: each mode has its own registrations (the key id
     * and mode are the key), so a test key never registers, squats or counts for a live key
     */
    mode: text('mode').notNull().default('live'),
    createdAt: createdAt(),
    lastUsedAt: timestamp('last_used_at', { withTimezone: true }),
    /** 'iOS' | 'macOS' (macOS keys carry a key access-control extension); keys before macOS are iOS */
    platform: text('platform').notNull().default('iOS'),
    /** iOS 27+: what the attestation said about distribution */
    validationCategory: text('validation_category'),
    bundleVersion: text('bundle_version'),
    /** the latest App Attest receipt (the attestation's, then each refreshed one) */
    receipt: bytea('receipt'),
    /** what failed in the stored receipt's check; null = it passed */
    receiptProblem: text('receipt_problem'),
    receiptType: text('receipt_type'),
    receiptCreatedAt: timestamp('receipt_created_at', { withTimezone: true }),
    /** Apple refreshes no sooner than this */
    receiptNotBefore: timestamp('receipt_not_before', { withTimezone: true }),
    receiptExpiresAt: timestamp('receipt_expires_at', { withTimezone: true }),
    /** from the latest refreshed receipt */
    riskMetric: integer('risk_metric'),
    receiptRefreshedAt: timestamp('receipt_refreshed_at', { withTimezone: true }),
    /** false once Apple answered 404 for the receipt */
    receiptRefreshable: boolean('receipt_refreshable').notNull().default(true),
    /** the refresher's schedule: claimed keys move it forward (back-off, a day after success) */
    receiptNextAttemptAt: timestamp('receipt_next_attempt_at', { withTimezone: true }),
    receiptFailures: integer('receipt_failures').notNull().default(0),
    receiptLastOutcome: text('receipt_last_outcome'),
  },
  // the refresher's claim reads the due keys in this order
  (t) => [
    primaryKey({ name: 'apple_keys_pkey', columns: [t.keyId, t.mode] }),
    index('apple_keys_receipt_next_attempt_at_idx').on(t.receiptNextAttemptAt),
    // the test-state pruner (ATTEST_TEST_RETENTION) reads the test rows alone
    index('apple_keys_test_created_at_idx')
      .on(t.createdAt)
      .where(sql`mode = 'test'`),
  ],
);

/** DeviceCheck keys per team, for refreshing App Attest receipts at Apple's data endpoint. */
export const appleCredentials = pgTable('apple_credentials', {
  teamId: text('team_id').primaryKey(),
  keyId: text('key_id').notNull(),
  /** PKCS#8 of the ES256 key, sealed under the master key */
  privateKey: bytea('private_key').notNull(),
  masterKeyId: text('master_key_id'),
  createdAt: createdAt(),
  /** set when Apple refused the key (401/403), cleared on success: reported once */
  rejectedAt: timestamp('rejected_at', { withTimezone: true }),
});

/** Registered Android hardware-attested keys, with the facts of their key description. */
export const androidKeys = pgTable(
  'android_keys',
  {
    keyId: bytea('key_id').notNull(),
    /** DER SubjectPublicKeyInfo, EC P-256 or RSA */
    publicKey: bytea('public_key').notNull(),
    packageName: text('package_name').notNull(),
    attestationSecurityLevel: text('attestation_security_level').notNull(),
    keyMintSecurityLevel: text('keymint_security_level').notNull(),
    verifiedBootState: text('verified_boot_state').notNull(),
    deviceLocked: boolean('device_locked').notNull(),
    verifiedBootKey: bytea('verified_boot_key').notNull(),
    /** YYYYMM; null when the key description has none */
    osPatchLevel: integer('os_patch_level'),
    attestationVersion: integer('attestation_version').notNull(),
    /** hex SHA-256 digests of the app's signing certificates, as attested */
    signatureDigests: text('signature_digests')
      .array()
      .notNull()
      .default(sql`'{}'::text[]`),
    /** mode of the API key that registered it: each mode has its own registrations (as apple_keys) */
    mode: text('mode').notNull().default('live'),
    createdAt: createdAt(),
    /** what the attestation says that no rule reads (version 500 tags, provisioning information), shown with each verify */
    extras: jsonb('extras'),
  },
  (t) => [
    primaryKey({ name: 'android_keys_pkey', columns: [t.keyId, t.mode] }),
    // the test-state pruner (ATTEST_TEST_RETENTION) reads the test rows alone
    index('android_keys_test_created_at_idx')
      .on(t.createdAt)
      .where(sql`mode = 'test'`),
  ],
);

/**
 * The android-key assertions accepted, by SHA-256 of the key id and the signed final nonce: an
 * assertion has no counter and no time, so one captured assertion is accepted once (INSERT ...
 * ON CONFLICT DO NOTHING RETURNING), whichever API key of the mode sends it again. Kept 31 days
 * (longer than the longest --max-verifies-per-device period), then pruned.
 */
export const androidKeyAssertions = pgTable(
  'android_key_assertions',
  {
    digest: bytea('digest').notNull(),
    /** the mode of the API key that sent it: each mode keeps its own */
    mode: text('mode').notNull(),
    acceptedAt: timestamp('accepted_at', { withTimezone: true }).notNull(),
  },
  (t) => [
    primaryKey({ name: 'android_key_assertions_pkey', columns: [t.digest, t.mode] }),
    index('android_key_assertions_accepted_at_idx').on(t.acceptedAt),
  ],
);

/**
 * Google's Android attestation status list, one row for every instance: the entries as Google's
 * JSON has them, where they came from and when.
 */
export const androidRevocations = pgTable('android_revocations', {
  /** always 'google' */
  id: text('id').primaryKey(),
  /** `{"<serial hex>": {"status", "reason"}}` */
  entries: jsonb('entries').notNull(),
  entryCount: integer('entry_count').notNull(),
  /** the URL or file it was taken from, or 'snapshot <date>' */
  source: text('source').notNull(),
  /** when the list was taken (the snapshot's date for the shipped one) */
  takenAt: timestamp('taken_at', { withTimezone: true }).notNull(),
  updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  /** why the last refresh from the URL failed (null: it succeeded, or none was tried); `attest status` shows it */
  lastRefreshError: text('last_refresh_error'),
  lastRefreshErrorAt: timestamp('last_refresh_error_at', { withTimezone: true }),
});

/**
 * One row: a known value sealed with the master key the database's secrets are under, so a wrong
 * key is refused at start (naming both key ids) even before any secret is stored.
 */
export const masterKeyCheck = pgTable('master_key_check', {
  id: integer('id').primaryKey().default(1),
  keyId: text('key_id').notNull(),
  checkValue: bytea('check_value').notNull(),
  updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
});

/**
 * The deployment's development App Attest CA (`attest dev init`): one row. The root's private key
 * is not kept (it signed the intermediate once); the intermediate's signs minted attestations.
 */
export const devCa = pgTable('dev_ca', {
  id: integer('id').primaryKey().default(1),
  rootCert: bytea('root_cert').notNull(),
  intermediateCert: bytea('intermediate_cert').notNull(),
  /** PKCS#8 DER of the intermediate's P-384 key; secret */
  intermediateKey: bytea('intermediate_key').notNull(),
  /** the master key `intermediate_key` is sealed under */
  masterKeyId: text('master_key_id'),
  createdAt: createdAt(),
});

/**
 * The keys that sign result tokens (ES256), shared by every instance. A key is published from
 * its creation and signs from `signing_from` (creation + the propagation delay, so every instance
 * has seen it first); it is retired when the next key starts signing. Never updated but by a
 * master key rotation (the sealed column).
 */
export const resultSigningKeys = pgTable(
  'result_signing_keys',
  {
    /** the `kid`: the RFC 7638 thumbprint of the public key */
    id: text('id').primaryKey(),
    /** DER SubjectPublicKeyInfo of the P-256 key */
    publicKey: bytea('public_key').notNull(),
    /** PKCS#8 DER of the P-256 key, sealed under the master key; secret */
    privateKey: bytea('private_key').notNull(),
    masterKeyId: text('master_key_id'),
    createdAt: createdAt(),
    signingFrom: timestamp('signing_from', { withTimezone: true }).notNull(),
    /**
     * 'live' or 'test': a test key signs the tokens of test-mode API keys only and is published
     * at its own JWKS URL, never beside the live keys
     */
    mode: text('mode').notNull().default('live'),
  },
  (t) => [index('result_signing_keys_signing_from_idx').on(t.signingFrom)],
);

/**
 * Verification counts of every instance, by minute (`attest stats`). Each instance counts in
 * memory and adds its counts here every few seconds (`count = count + excluded.count`), so the
 * instances' counts add up. Empty strings stand for "unknown" or "none" (a primary key column
 * cannot be null). Rows older than ATTEST_STATS_RETENTION are deleted.
 */
export const verificationStats = pgTable(
  'verification_stats',
  {
    /** the start of the minute (UTC) the verifications were answered in */
    minute: timestamp('minute', { withTimezone: true }).notNull(),
    apiKeyId: text('api_key_id').notNull(),
    /** the API key's mode: 'live' | 'test' */
    mode: text('mode').notNull(),
    /** the token's service (core/kinds.ts); '' when the token named none */
    service: text('service').notNull(),
    /** the App Attest app ID or Android package ('other' when not allowlisted; '' when unknown) */
    app: text('app').notNull(),
    /** 'valid' | 'rejected' | 'observed' | 'error' */
    outcome: text('outcome').notNull(),
    /** the reason code of a rejected or observed verification; '' otherwise */
    reason: text('reason').notNull(),
    count: bigint('count', { mode: 'number' }).notNull(),
  },
  // minute first: the window of a query and the retention's delete both read it by range
  (t) => [
    primaryKey({
      name: 'verification_stats_pk',
      columns: [t.minute, t.apiKeyId, t.mode, t.service, t.app, t.outcome, t.reason],
    }),
  ],
);

/**
 * The statistics batches already added to verification_stats: a flush whose commit succeeded but
 * whose answer was lost is retried under the same id and adds nothing the second time (the batch's
 * insert here and its counts are one statement). Pruned with the counts' retention.
 */
export const verificationStatsBatches = pgTable(
  'verification_stats_batches',
  {
    /** `<instance id>:<sequence number>` of the recorder that made it */
    id: text('id').primaryKey(),
    appliedAt: timestamp('applied_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index('verification_stats_batches_applied_at_idx').on(t.appliedAt)],
);
