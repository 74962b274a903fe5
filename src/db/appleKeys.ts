import { sql } from 'drizzle-orm';
import type { AppleEnvironment } from '../core/apple/appleTokenDetails.js';
import type { AppleKeyRecord, AppleKeyStore } from '../core/ports.js';
import { rowsOf, type Database } from './database.js';
import { fixedStatement } from './fixedStatement.js';

interface Row {
  key_id: Uint8Array;
  public_key: Uint8Array;
  app_id: string;
  environment: string;
  counter: string | number;
  mode: string;
  risk_metric: number | null;
  validation_category: string | null;
  bundle_version: string | null;
  platform: string;
}

const COLUMN_LIST =
  'key_id, public_key, app_id, environment, counter, mode, risk_metric, validation_category, bundle_version, platform';
const COLUMNS = sql.raw(COLUMN_LIST);

// every assertion runs one of these: fixed texts (fixedStatement.ts)
// each mode has its own rows (key id and mode are the key): docs/security.md's store table
const FIND = fixedStatement<Row>(
  `select ${COLUMN_LIST} from apple_keys where key_id = $1 and mode = $2`,
);
const RAISE = fixedStatement<{ counter: string | number }>(`
  update apple_keys set counter = $2, last_used_at = now()
  where key_id = $1 and mode = $3 and counter < $2
  returning counter`);
const RAISE_IF_UNCHANGED = fixedStatement<{ counter: string | number }>(`
  update apple_keys set counter = $2, last_used_at = now()
  where key_id = $1 and mode = $6 and counter < $2
    and public_key = $3 and app_id = $4 and environment = $5
    and risk_metric is not distinct from $7::integer
  returning counter`);

/** What is stored about a key's receipt (`attest apple receipts show`). */
export interface AppleKeyReceiptView {
  keyId: Uint8Array;
  appId: string;
  environment: AppleEnvironment;
  receipt: Uint8Array | null;
  problem: string | null;
  type: string | null;
  creationTime: Date | null;
  notBefore: Date | null;
  expirationTime: Date | null;
  riskMetric: number | null;
  refreshedAt: Date | null;
  refreshable: boolean;
  nextAttemptAt: Date | null;
  failures: number;
  lastOutcome: string | null;
  validationCategory: string | null;
  bundleVersion: string | null;
  lastUsedAt: Date | null;
}

/** Registered App Attest keys; every write is one atomic statement (docs/token-format.md section 5). */
export function createAppleKeyRepository(db: Database): AppleKeyStore & {
  list(): Promise<AppleKeyRecord[]>;
  receipt(keyId: Uint8Array): Promise<AppleKeyReceiptView | null>;
} {
  return {
    async find(keyId, mode = 'live') {
      const rows = await FIND(db, [Buffer.from(keyId), mode]);
      return rows[0] ? toRecord(rows[0]) : null;
    },

    async register(record) {
      const r = record.receipt ?? null;
      const time = (d: Date | null | undefined) => (d ? d.toISOString() : null);
      // a valid receipt is due for its first refresh from its creation (Apple's first answer
      // carries the risk metric); an invalid one is kept for the record but never sent to Apple
      const rows = rowsOf<{ key_id: Uint8Array }>(
        await db.execute(sql`
          insert into apple_keys (key_id, public_key, app_id, environment, counter, mode, platform,
            validation_category, bundle_version, receipt, receipt_problem, receipt_type,
            receipt_created_at, receipt_not_before, receipt_expires_at, risk_metric,
            receipt_refreshable, receipt_next_attempt_at, last_used_at)
          values (${Buffer.from(record.keyId)}, ${Buffer.from(record.publicKey)}, ${record.appId}, ${record.environment}, ${record.counter}, ${record.mode ?? 'live'}, ${record.platform ?? 'iOS'},
            ${record.validationCategory ?? null}, ${record.bundleVersion ?? null},
            ${r ? Buffer.from(r.bytes) : null}, ${r?.problem ?? null}, ${r?.type ?? null},
            ${time(r?.creationTime)}::timestamptz, ${time(r?.notBefore)}::timestamptz, ${time(r?.expirationTime)}::timestamptz, ${r?.riskMetric ?? null}::integer,
            ${r !== null && r.problem === null},
            case when ${r !== null && r.problem === null} then coalesce(${time(r?.notBefore)}::timestamptz, ${time(r?.creationTime)}::timestamptz, now()) end,
            now())
          on conflict (key_id, mode) do nothing
          returning key_id`),
      );
      return rows.length === 1;
    },

    async raiseCounter(keyId, counter, mode = 'live') {
      return (await RAISE(db, [Buffer.from(keyId), counter, mode])).length === 1;
    },

    async raiseCounterIfUnchanged(expected, counter) {
      const rows = await RAISE_IF_UNCHANGED(db, [
        Buffer.from(expected.keyId),
        counter,
        Buffer.from(expected.publicKey),
        expected.appId,
        expected.environment,
        expected.mode ?? 'live',
        // a refreshed risk metric makes the row another: the verifier reads it again at once
        expected.riskMetric ?? null,
      ]);
      return rows.length === 1;
    },

    async list() {
      const rows = rowsOf<Row>(
        await db.execute(sql`select ${COLUMNS} from apple_keys order by created_at`),
      );
      return rows.map(toRecord);
    },

    async receipt(keyId) {
      const rows = rowsOf<{
        key_id: Uint8Array;
        app_id: string;
        environment: string;
        receipt: Uint8Array | null;
        receipt_problem: string | null;
        receipt_type: string | null;
        receipt_created_at: Date | string | null;
        receipt_not_before: Date | string | null;
        receipt_expires_at: Date | string | null;
        risk_metric: number | null;
        receipt_refreshed_at: Date | string | null;
        receipt_refreshable: boolean;
        receipt_next_attempt_at: Date | string | null;
        receipt_failures: number;
        receipt_last_outcome: string | null;
        validation_category: string | null;
        bundle_version: string | null;
        last_used_at: Date | string | null;
      }>(
        await db.execute(sql`
          select key_id, app_id, environment, receipt, receipt_problem, receipt_type, receipt_created_at,
            receipt_not_before, receipt_expires_at, risk_metric, receipt_refreshed_at, receipt_refreshable,
            receipt_next_attempt_at, receipt_failures, receipt_last_outcome, validation_category,
            bundle_version, last_used_at
          from apple_keys where key_id = ${Buffer.from(keyId)}`),
      );
      const row = rows[0];
      if (!row) return null;
      return {
        keyId: new Uint8Array(row.key_id),
        appId: row.app_id,
        environment: row.environment as AppleEnvironment,
        receipt: row.receipt ? new Uint8Array(row.receipt) : null,
        problem: row.receipt_problem,
        type: row.receipt_type,
        creationTime: dateOf(row.receipt_created_at),
        notBefore: dateOf(row.receipt_not_before),
        expirationTime: dateOf(row.receipt_expires_at),
        riskMetric: row.risk_metric === null ? null : Number(row.risk_metric),
        refreshedAt: dateOf(row.receipt_refreshed_at),
        refreshable: row.receipt_refreshable,
        nextAttemptAt: dateOf(row.receipt_next_attempt_at),
        failures: Number(row.receipt_failures),
        lastOutcome: row.receipt_last_outcome,
        validationCategory: row.validation_category,
        bundleVersion: row.bundle_version,
        lastUsedAt: dateOf(row.last_used_at),
      };
    },
  };
}

/** A timestamptz as the drivers give it (Date from postgres.js, text or Date from PGlite). */
export function dateOf(value: Date | string | null): Date | null {
  if (value === null) return null;
  return value instanceof Date ? value : new Date(value);
}

function toRecord(row: Row): AppleKeyRecord {
  return {
    keyId: new Uint8Array(row.key_id),
    publicKey: new Uint8Array(row.public_key),
    appId: row.app_id,
    environment: row.environment as AppleEnvironment,
    counter: Number(row.counter),
    mode: row.mode === 'test' ? 'test' : 'live',
    riskMetric: row.risk_metric === null ? null : Number(row.risk_metric),
    validationCategory: row.validation_category,
    bundleVersion: row.bundle_version,
    platform: row.platform === 'macOS' ? 'macOS' : 'iOS',
  };
}
