import { sql } from 'drizzle-orm';
import type { AppleEnvironment, AppleKeyRecord, AppleKeyStore } from '../core/types.js';
import { rowsOf, type Database } from './client.js';

interface Row {
  key_id: Uint8Array;
  public_key: Uint8Array;
  app_id: string;
  environment: string;
  counter: string | number;
  mode: string;
}

/** Registered App Attest keys; every write is one atomic statement (docs/token-format.md section 5). */
export function createAppleKeyRepository(
  db: Database,
): AppleKeyStore & { list(): Promise<AppleKeyRecord[]> } {
  return {
    async find(keyId) {
      const rows = rowsOf<Row>(
        await db.execute(
          sql`select key_id, public_key, app_id, environment, counter, mode from apple_keys where key_id = ${Buffer.from(keyId)}`,
        ),
      );
      return rows[0] ? toRecord(rows[0]) : null;
    },

    async register(record) {
      const rows = rowsOf<{ key_id: Uint8Array }>(
        await db.execute(sql`
          insert into apple_keys (key_id, public_key, app_id, environment, counter, mode)
          values (${Buffer.from(record.keyId)}, ${Buffer.from(record.publicKey)}, ${record.appId}, ${record.environment}, ${record.counter}, ${record.mode ?? 'live'})
          on conflict (key_id) do nothing
          returning key_id`),
      );
      return rows.length === 1;
    },

    async raiseCounter(keyId, counter) {
      const rows = rowsOf<{ counter: string | number }>(
        await db.execute(sql`
          update apple_keys set counter = ${counter}, last_used_at = now()
          where key_id = ${Buffer.from(keyId)} and counter < ${counter}
          returning counter`),
      );
      return rows.length === 1;
    },

    async raiseCounterIfUnchanged(expected, counter) {
      const rows = rowsOf<{ counter: string | number }>(
        await db.execute(sql`
          update apple_keys set counter = ${counter}, last_used_at = now()
          where key_id = ${Buffer.from(expected.keyId)} and counter < ${counter}
            and public_key = ${Buffer.from(expected.publicKey)} and app_id = ${expected.appId} and environment = ${expected.environment}
            and mode = ${expected.mode ?? 'live'}
          returning counter`),
      );
      return rows.length === 1;
    },

    async list() {
      const rows = rowsOf<Row>(
        await db.execute(
          sql`select key_id, public_key, app_id, environment, counter, mode from apple_keys order by created_at`,
        ),
      );
      return rows.map(toRecord);
    },
  };
}

function toRecord(row: Row): AppleKeyRecord {
  return {
    keyId: new Uint8Array(row.key_id),
    publicKey: new Uint8Array(row.public_key),
    appId: row.app_id,
    environment: row.environment as AppleEnvironment,
    counter: Number(row.counter),
    mode: row.mode === 'test' ? 'test' : 'live',
  };
}
