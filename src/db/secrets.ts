import { Fault } from '../core/fault.js';
import { sql, type SQL } from 'drizzle-orm';
import { recordAudit, type Auditor } from './audit.js';
import { rowsOf, type Database } from './database.js';
import { SecretOpenError, type Sealed, type SecretBox } from './secretBox.js';

/**
 * Every column that holds a sealed secret. A table with secrets adds itself here: a text key (the
 * associated data names the row), bytea secret columns, and a nullable text master key id column
 * (null = in clear, sealed by the migration path). Migration, rotation and the start-up check
 * then cover it.
 */
export interface SealedTable {
  table: string;
  /** text columns that identify a row; bound into every secret's associated data */
  key: readonly string[];
  /** bytea columns sealed together under one master key (a null value stays null) */
  columns: readonly string[];
  keyIdColumn: string;
}

export const SEALED_TABLES: readonly SealedTable[] = [
  {
    table: 'android_key_pairs',
    key: ['package_name', 'id'],
    columns: ['decryption_key', 'verification_key', 'signing_key'],
    keyIdColumn: 'master_key_id',
  },
  {
    table: 'android_packages',
    key: ['package_name'],
    columns: ['service_account'],
    keyIdColumn: 'service_account_key_id',
  },
  { table: 'dev_ca', key: ['id'], columns: ['intermediate_key'], keyIdColumn: 'master_key_id' },
  {
    table: 'result_signing_keys',
    key: ['id'],
    columns: ['private_key'],
    keyIdColumn: 'master_key_id',
  },
  {
    table: 'apple_credentials',
    key: ['team_id'],
    columns: ['private_key'],
    keyIdColumn: 'master_key_id',
  },
  // tokens kept for replay (ATTEST_CAPTURE): an RP's user's device evidence
  { table: 'token_captures', key: ['id'], columns: ['token'], keyIdColumn: 'master_key_id' },
];

/** The associated data of a secret: its table, column and row, so a value moved elsewhere does not open. */
export function aadFor(table: string, column: string, key: readonly string[]): string {
  return JSON.stringify([table, column, ...key]);
}

/** The master key does not fit the database's secrets (or is missing); one line says which key is expected. */
export class MasterKeyError extends Fault {
  override readonly name = 'MasterKeyError';
  constructor(message: string) {
    super('master_key', message, { exit: 2 });
  }
}

const CHECK_PLAINTEXT = new TextEncoder().encode('attest master key check');
const CHECK_AAD = aadFor('master_key_check', 'check_value', ['1']);

/** The master key id the database's secrets are under, or null (none yet, or the schema predates it). */
export async function sealedUnderKeyId(db: Database): Promise<string | null> {
  const present = rowsOf<{ present: boolean }>(
    await db.execute(sql`select to_regclass('master_key_check') is not null as present`),
  );
  if (!present[0]?.present) return null;
  const rows = rowsOf<{ key_id: string }>(
    await db.execute(sql`select key_id from master_key_check where id = 1`),
  );
  return rows[0]?.key_id ?? null;
}

export interface CheckOptions {
  /** where the key came from, for the message (a path or a variable name, never the key) */
  source: string;
  /** record the key as the database's when none is (false: read-only commands) */
  establish?: boolean;
  /** tolerate secrets still in clear (the migration path, which seals them next) */
  allowClear?: boolean;
}

/**
 * Refuses a master key that is not the one the database's secrets are under, naming both key ids,
 * so a wrong key fails once at start rather than as a decryption failure on every token.
 */
export async function checkMasterKey(
  db: Database,
  box: SecretBox,
  options: CheckOptions,
): Promise<void> {
  let rows = rowsOf<{ key_id: string; check_value: Uint8Array }>(
    await db.execute(sql`select key_id, check_value from master_key_check where id = 1`),
  );
  if (!rows[0] && options.establish !== false) {
    const sealed = box.seal(CHECK_PLAINTEXT, CHECK_AAD);
    // two instances starting together: the first one's key wins and the other is refused below
    await db.execute(
      sql`insert into master_key_check (id, key_id, check_value) values (1, ${sealed.keyId}, ${Buffer.from(sealed.ciphertext)}) on conflict (id) do nothing`,
    );
    rows = rowsOf(
      await db.execute(sql`select key_id, check_value from master_key_check where id = 1`),
    );
  }
  const row = rows[0];
  if (row) {
    if (!box.keyIds.includes(row.key_id)) throw mismatch(row.key_id, box, options.source);
    try {
      box.open({ keyId: row.key_id, ciphertext: new Uint8Array(row.check_value) }, CHECK_AAD);
    } catch (err) {
      if (err instanceof SecretOpenError)
        throw new MasterKeyError(
          `the master key check value of the database does not open with key ${row.key_id}: it was altered; restore the database from a backup`,
        );
      throw err;
    }
  }
  for (const t of SEALED_TABLES) {
    const ids = rowsOf<{ key_id: string | null; n: number | string }>(
      // a row without any secret (a package without a service account) is neither clear nor sealed
      await db.execute(
        sql`select ${sql.identifier(t.keyIdColumn)} as key_id, count(*) as n from ${sql.identifier(t.table)}
            where ${sql.join(
              t.columns.map((c) => sql`${sql.identifier(c)} is not null`),
              sql` or `,
            )} group by 1`,
      ),
    );
    for (const { key_id, n } of ids) {
      if (key_id === null) {
        if (!options.allowClear)
          throw new MasterKeyError(
            `${n} row(s) of ${t.table} hold secrets in clear: run "attest db migrate" to seal them`,
          );
      } else if (!box.keyIds.includes(key_id)) {
        throw mismatch(key_id, box, options.source);
      }
    }
  }
}

function mismatch(expected: string, box: SecretBox, source: string): MasterKeyError {
  return new MasterKeyError(
    `wrong master key: the database's secrets are sealed with master key ${expected}, but the key given (${source}) is ${box.keyId}; ` +
      `give the key ${expected} (ATTEST_MASTER_KEY_FILE)`,
  );
}

/**
 * Seals every secret still in clear (rows of the previous release) in one transaction. Part of
 * the migration path; rows sealed meanwhile by another instance are left as they are.
 */
export async function sealClearSecrets(
  db: Database,
  box: SecretBox,
  source: string,
): Promise<{ sealed: number }> {
  return db.transaction(async (tx) => {
    await checkMasterKey(tx as unknown as Database, box, { source, allowClear: true });
    return { sealed: await reseal(tx as unknown as Database, box, 'clear') };
  });
}

/**
 * Re-wraps every secret under the box's sealing key (the new master key; the box also holds the
 * old one), records the new key and the audit event `master_key.rotate` (key ids only), in one
 * transaction: a failure leaves everything under the old key and records nothing. The event goes
 * to `auditor.log` once committed.
 */
export async function rotateMasterKey(
  db: Database,
  box: SecretBox,
  source: string,
  auditor: Auditor,
): Promise<{ rewrapped: number; previousKeyId: string | null }> {
  const result = await db.transaction(async (tx) => {
    const t = tx as unknown as Database;
    // the row lock makes concurrent rotations (and first-time checks) wait for this one
    const rows = rowsOf<{ key_id: string }>(
      await t.execute(sql`select key_id from master_key_check where id = 1 for update`),
    );
    const previousKeyId = rows[0]?.key_id ?? null;
    if (previousKeyId === box.keyId)
      throw new MasterKeyError(
        `the database's secrets are already sealed with master key ${box.keyId}; nothing to rotate`,
      );
    await checkMasterKey(t, box, { source, allowClear: true, establish: false });
    const rewrapped = await reseal(t, box, 'all');
    const check = box.seal(CHECK_PLAINTEXT, CHECK_AAD);
    await t.execute(sql`
      insert into master_key_check (id, key_id, check_value) values (1, ${check.keyId}, ${Buffer.from(check.ciphertext)})
      on conflict (id) do update set key_id = excluded.key_id, check_value = excluded.check_value, updated_at = now()`);
    const event = await recordAudit(t, auditor, {
      action: 'master_key.rotate',
      target: box.keyId,
      before: { keyId: previousKeyId },
      after: { keyId: box.keyId, rewrapped },
    });
    return { rewrapped, previousKeyId, event };
  });
  auditor.log(result.event);
  return { rewrapped: result.rewrapped, previousKeyId: result.previousKeyId };
}

/** `clear`: seal rows in clear; `all`: also re-wrap rows under another key than the sealing one. */
async function reseal(db: Database, box: SecretBox, which: 'clear' | 'all'): Promise<number> {
  let count = 0;
  for (const t of SEALED_TABLES) {
    const id = (name: string) => sql.identifier(name);
    const list = (names: readonly string[]) => sql.join(names.map(id), sql`, `);
    const holdsSecret = sql.join(
      t.columns.map((c) => sql`${id(c)} is not null`),
      sql` or `,
    );
    const under =
      which === 'clear'
        ? sql`${id(t.keyIdColumn)} is null`
        : sql`${id(t.keyIdColumn)} is distinct from ${box.keyId}`;
    // rows without any secret (a package without a service account) are left alone
    const condition = sql`${under} and (${holdsSecret})`;
    const rows = rowsOf<Record<string, unknown>>(
      await db.execute(
        sql`select ${list(t.key)}, ${list(t.columns)}, ${id(t.keyIdColumn)} from ${id(t.table)} where ${condition} for update`,
      ),
    );
    for (const row of rows) {
      const key = t.key.map((k) => String(row[k]));
      const keyId = row[t.keyIdColumn] as string | null;
      const sets: SQL[] = t.columns.map((column) => {
        const value = row[column] as Uint8Array | null;
        if (value === null) return sql`${id(column)} = null`;
        const aad = aadFor(t.table, column, key);
        const sealed: Sealed =
          keyId === null
            ? box.seal(new Uint8Array(value), aad)
            : box.rewrap({ keyId, ciphertext: new Uint8Array(value) }, aad);
        return sql`${id(column)} = ${Buffer.from(sealed.ciphertext)}`;
      });
      const where = sql.join(
        t.key.map((k, i) => sql`${id(k)} = ${key[i]}`),
        sql` and `,
      );
      await db.execute(
        sql`update ${id(t.table)} set ${sql.join(sets, sql`, `)}, ${id(t.keyIdColumn)} = ${box.keyId} where ${where}`,
      );
      count++;
    }
  }
  return count;
}
