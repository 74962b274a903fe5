import { sql, type SQL } from 'drizzle-orm';
import { ANDROID_RULES, APPLE_RULES, ruleAudits } from './policyColumns.js';

/** How one column appears in audit summaries: its key there, and its value (the column as it is by default). */
export interface AuditedColumn {
  key: string;
  /** the summary value from the row `row` (default: the column itself) */
  value?: (row: SQL) => SQL;
}

/**
 * What the service accepts, column by column: every column of these tables is either audited
 * (its before and after land in the audit event of any change) or named in `NOT_AUDITED` with the
 * reason. test/db/auditedColumns.test.ts derives the columns from the drizzle schema, so a column
 * added to one of these tables without a line here fails the tests.
 */
export const AUDITED_COLUMNS = {
  api_keys: {
    name: { key: 'name' },
    mode: { key: 'mode' },
    expires_at: { key: 'expiresAt' },
    revoked_at: { key: 'revokedAt' },
    result_tokens: { key: 'resultTokens' },
    rejection_details: { key: 'rejectionDetails' },
    apps: { key: 'apps', value: (r) => sql`to_jsonb(${r}.apps)` },
  },
  apple_apps: {
    env: { key: 'env' },
    // the rules of the App Attest policy table, named as the table names them
    ...ruleAudits(APPLE_RULES),
    observe: { key: 'observe', value: (r) => sql`to_jsonb(${r}.observe)` },
    // N and the window in one value, as the flag gives them (null: not counted)
    max_verifies_per_device: {
      key: 'maxVerifiesPerDevice',
      value: (r) =>
        sql`case when ${r}.max_verifies_per_device is null then null else jsonb_build_object('max', ${r}.max_verifies_per_device, 'periodSeconds', ${r}.device_window_seconds) end`,
    },
  },
  android_packages: {
    certificate_digests: {
      key: 'certificateDigests',
      value: (r) => sql`to_jsonb(${r}.certificate_digests)`,
    },
    min_verdict: { key: 'minVerdict' },
    allow_unrecognized: { key: 'allowUnrecognized' },
    max_age_seconds: { key: 'maxAgeSeconds' },
    // the rules of the gms and android-key policy tables, named as the tables name them
    ...ruleAudits(ANDROID_RULES),
    // the account itself is a secret: its fingerprint stands for it (null: none stored)
    service_account_fingerprint: {
      key: 'serviceAccount',
      value: (r) =>
        sql`case when ${r}.service_account is null then null else coalesce(${r}.service_account_fingerprint, 'stored before fingerprints were kept') end`,
    },
    observe: { key: 'observe', value: (r) => sql`to_jsonb(${r}.observe)` },
    // N and the window in one value, as the flag gives them (null: not counted)
    max_verifies_per_device: {
      key: 'maxVerifiesPerDevice',
      value: (r) =>
        sql`case when ${r}.max_verifies_per_device is null then null else jsonb_build_object('max', ${r}.max_verifies_per_device, 'periodSeconds', ${r}.device_window_seconds) end`,
    },
  },
  android_key_pairs: {
    // a package's summary lists its pairs' fingerprints: `keyPairs` (live) and `testKeyPairs`
    id: { key: 'keyPairs' },
    test_only: { key: 'testKeyPairs' },
  },
} as const satisfies Record<string, Record<string, AuditedColumn>>;

/** Columns of the audited tables that are not part of what the service accepts, and why. */
export const NOT_AUDITED: Record<keyof typeof AUDITED_COLUMNS, Record<string, string>> = {
  api_keys: {
    id: 'the event target',
    hash: 'a secret (argon2 of the key); the id names the key',
    precheck: 'a secret (HMAC of the key, beside its hash); the id names the key',
    created_at: 'the event time',
    last_used_at: 'usage, not configuration',
  },
  apple_apps: {
    app_id: 'the event target',
    created_at: 'the event time',
    device_window_seconds: 'audited within maxVerifiesPerDevice (periodSeconds)',
  },
  android_packages: {
    package_name: 'the event target',
    service_account: 'a secret: audited as service_account_fingerprint',
    service_account_key_id:
      'the master key it is sealed under (master_key.rotate records rotations)',
    created_at: 'the event time',
    device_window_seconds: 'audited within maxVerifiesPerDevice (periodSeconds)',
  },
  android_key_pairs: {
    package_name: 'the event target',
    decryption_key: 'a secret: the pair is audited by its id (a fingerprint)',
    verification_key: 'key material: the pair is audited by its id (a fingerprint)',
    signing_key: 'a secret: the pair is audited by its id (a fingerprint)',
    master_key_id: 'the master key it is sealed under (master_key.rotate records rotations)',
    created_at: 'the event time',
  },
};

/**
 * Tables whose columns are not audited one by one, and why. Every other table of the schema must
 * be in `AUDITED_COLUMNS` (test/db/auditedColumns.test.ts checks).
 */
export const NOT_AUDITED_TABLES: Record<string, string> = {
  attestation_sessions: 'per-request state, not configuration',
  consumed_results: 'per-request state (result tokens consumed once), not configuration',
  apple_keys:
    'device registrations made by verify, not configuration (receipts refreshed by serve)',
  apple_credentials:
    'audited as apple.credentials.add and .remove (team, key id, public key fingerprint)',
  api_key_origins: 'where keys were used from, not configuration',
  audit_events: 'the trail itself',
  audit_chain: "the trail's hash chain head, set by the insert trigger of audit_events",
  master_key_check: 'audited as master_key.rotate (key ids)',
  dev_ca: 'audited as dev.init and dev.rotate (rootSha256 of the development root)',
  result_signing_keys: 'audited as result_keys.create and result_keys.rotate (key ids and dates)',
  android_keys: 'device registrations made by verify (android-key), not configuration',
  device_velocity: 'per-device verify counts made by verify, not configuration',
  android_issuer_blocks:
    'the blocklist of issuing certificates: each block and unblock is an audit event of its own (android_issuers.block, android_issuers.unblock)',
  android_issuer_velocity:
    'new keys per issuing certificate counted by verify (--max-keys-per-issuer), not configuration',
  android_key_assertions:
    'android-key assertions accepted once (their digests), made by verify, not configuration',
  verification_stats_batches:
    'ids of statistics batches already added (exactly-once flushes), not configuration',
  verification_stats: 'verification counts flushed by serve (attest stats), not configuration',
  verification_devices:
    'the devices behind the counts (hashed), upserted by serve for attest stats, not configuration',
  attest_changes: 'the change feed (which table changed, in commit order), written by triggers',
  attest_change_version: "the change feed's last version, raised by its triggers",
  token_captures:
    'tokens kept for replay by verify (ATTEST_CAPTURE), not configuration; each read of a token is audited as capture.read',
  android_revocations:
    'the attestation status list: manual updates are audited as android.revocations.update (source, takenAt, entry count)',
};

/**
 * `jsonb_build_object(...)` of a row's audited columns of `table`, plus `extra` entries.
 * @param row the row's alias or CTE name in the statement
 */
export function auditSummary(
  table: 'api_keys' | 'apple_apps' | 'android_packages',
  row: SQL,
  extra: Record<string, SQL> = {},
): SQL {
  const columns: Record<string, AuditedColumn> = AUDITED_COLUMNS[table];
  const entries = [
    ...Object.entries(columns).map(
      ([column, c]) =>
        [c.key, c.value ? c.value(row) : sql`${row}.${sql.identifier(column)}`] as const,
    ),
    ...Object.entries(extra),
  ];
  return sql`jsonb_build_object(${sql.join(
    entries.map(([key, value]) => sql`${key}::text, ${value}`),
    sql`, `,
  )})`;
}
