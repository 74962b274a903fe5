import { sql } from 'drizzle-orm';
import type {
  AndroidBootState,
  AndroidKeyExtras,
  AndroidKeyRecord,
  AndroidKeyStore,
  AndroidSecurityLevel,
} from '../core/types.js';
import { rowsOf, type Database } from './client.js';
import { fixedStatement } from './fixedStatement.js';

interface Row {
  key_id: Uint8Array;
  public_key: Uint8Array;
  package_name: string;
  attestation_security_level: string;
  keymint_security_level: string;
  verified_boot_state: string;
  device_locked: boolean;
  verified_boot_key: Uint8Array;
  os_patch_level: number | null;
  attestation_version: number;
  signature_digests: string[] | string | null;
  mode: string;
  /** jsonb: an object from one driver, its text from the other */
  extras: unknown;
}

const COLUMN_LIST =
  'key_id, public_key, package_name, attestation_security_level, keymint_security_level, verified_boot_state, device_locked, verified_boot_key, os_patch_level, attestation_version, signature_digests, mode, extras';
const COLUMNS = sql.raw(COLUMN_LIST);
// every assertion reads its key: a fixed text (fixedStatement.ts)
const FIND = fixedStatement<Row>(`select ${COLUMN_LIST} from android_keys where key_id = $1`);

/**
 * Registered Android hardware-attested keys. Registration is one INSERT ... ON CONFLICT DO
 * NOTHING: of any number of racing requests on any number of instances, exactly one registers.
 */
export function createAndroidKeyRepository(
  db: Database,
): AndroidKeyStore & { list(): Promise<AndroidKeyRecord[]> } {
  return {
    async find(keyId) {
      const rows = await FIND(db, [Buffer.from(keyId)]);
      return rows[0] ? toRecord(rows[0]) : null;
    },

    async register(record) {
      // digests sent as one text: the two drivers bind array parameters differently
      const digests = record.signatureDigests.map((d) => Buffer.from(d).toString('hex')).join(',');
      const rows = rowsOf<{ key_id: Uint8Array }>(
        await db.execute(sql`
          insert into android_keys (${COLUMNS})
          values (${Buffer.from(record.keyId)}, ${Buffer.from(record.publicKey)}, ${record.packageName},
                  ${record.attestationSecurityLevel}, ${record.keyMintSecurityLevel}, ${record.verifiedBootState},
                  ${record.deviceLocked}, ${Buffer.from(record.verifiedBootKey)}, ${record.osPatchLevel},
                  ${record.attestationVersion}, ${digests === '' ? sql`'{}'::text[]` : sql`string_to_array(${digests}, ',')`},
                  ${record.mode ?? 'live'}, ${record.extras ? JSON.stringify(record.extras) : null}::jsonb)
          on conflict (key_id) do nothing
          returning key_id`),
      );
      return rows.length === 1;
    },

    async list() {
      const rows = rowsOf<Row>(
        await db.execute(sql`select ${COLUMNS} from android_keys order by created_at`),
      );
      return rows.map(toRecord);
    },
  };
}

function toRecord(row: Row): AndroidKeyRecord {
  const raw = typeof row.extras === 'string' ? (JSON.parse(row.extras) as unknown) : row.extras;
  // written by this service from a verified attestation; anything else is not shown
  const extras =
    raw && typeof raw === 'object' && !Array.isArray(raw) ? (raw as AndroidKeyExtras) : null;
  const digests =
    typeof row.signature_digests === 'string'
      ? row.signature_digests
          .replace(/^\{|\}$/g, '')
          .split(',')
          .filter(Boolean)
      : (row.signature_digests ?? []);
  return {
    keyId: new Uint8Array(row.key_id),
    publicKey: new Uint8Array(row.public_key),
    packageName: row.package_name,
    attestationSecurityLevel: row.attestation_security_level as AndroidSecurityLevel,
    keyMintSecurityLevel: row.keymint_security_level as AndroidSecurityLevel,
    verifiedBootState: row.verified_boot_state as AndroidBootState,
    deviceLocked: row.device_locked,
    verifiedBootKey: new Uint8Array(row.verified_boot_key),
    osPatchLevel: row.os_patch_level === null ? null : Number(row.os_patch_level),
    attestationVersion: Number(row.attestation_version),
    signatureDigests: digests.map((h) => new Uint8Array(Buffer.from(h, 'hex'))),
    mode: row.mode === 'test' ? 'test' : 'live',
    ...(extras ? { extras } : {}),
  };
}
