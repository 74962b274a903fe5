import { sql } from 'drizzle-orm';
import type {
  AndroidBootState,
  AndroidKeyExtras,
  AndroidSecurityLevel,
} from '../core/androidKey/androidKeyTokenDetails.js';
import type { AndroidKeyRecord, AndroidKeyStore } from '../core/ports.js';
import { rowsOf, type Database } from './database.js';
import { fixedStatement } from './fixedStatement.js';
import { pruneBatch } from './pruneLock.js';

// the assertion pruner's advisory lock (each table prunes under its own id)
const PRUNE_LOCK_ID = 0x616b6173; // 'akas'

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
// each mode has its own rows (key id and mode are the key): docs/security.md's store table
const FIND = fixedStatement<Row>(
  `select ${COLUMN_LIST} from android_keys where key_id = $1 and mode = $2`,
);
// one accepted assertion, once: a replay (any API key of the mode) inserts nothing
const RECORD_ASSERTION = fixedStatement<{ digest: Uint8Array }>(`
  insert into android_key_assertions (digest, mode, accepted_at) values ($1, $2, $3::timestamptz)
  on conflict (digest, mode) do nothing
  returning digest`);

const ASSERTION_ACCEPTED_AT = fixedStatement<{ accepted_at: Date | string }>(`
  select accepted_at from android_key_assertions where digest = $1 and mode = $2`);

/** How long an accepted assertion is remembered: longer than the longest per-device window (30 d). */
export const ASSERTION_MEMORY_SECONDS = 31 * 86_400;

/**
 * Registered Android hardware-attested keys. Registration is one INSERT ... ON CONFLICT DO
 * NOTHING: of any number of racing requests on any number of instances, exactly one registers.
 */
export function createAndroidKeyRepository(db: Database): AndroidKeyStore &
  Required<Pick<AndroidKeyStore, 'recordAssertion' | 'assertionAcceptedAt'>> & {
    list(): Promise<AndroidKeyRecord[]>;
    /**
     * deletes at most `limit` assertions accepted before `cutoff`; returns how many went, or null
     * when `advisoryLock` is set and another instance is pruning
     */
    pruneAssertionBatch(
      cutoff: Date,
      limit: number,
      options?: { advisoryLock?: boolean },
    ): Promise<number | null>;
  } {
  return {
    async find(keyId, mode = 'live') {
      const rows = await FIND(db, [Buffer.from(keyId), mode]);
      return rows[0] ? toRecord(rows[0]) : null;
    },

    async recordAssertion({ digest, mode, at }) {
      return (
        (await RECORD_ASSERTION(db, [Buffer.from(digest), mode, at.toISOString()])).length === 1
      );
    },

    async assertionAcceptedAt(digest, mode) {
      const rows = await ASSERTION_ACCEPTED_AT(db, [Buffer.from(digest), mode]);
      return rows[0] ? new Date(rows[0].accepted_at) : null;
    },

    async pruneAssertionBatch(cutoff, limit, options = {}) {
      return pruneBatch(db, PRUNE_LOCK_ID, options, {
        table: 'android_key_assertions',
        keys: ['digest', 'mode'],
        where: sql`accepted_at < ${cutoff.toISOString()}::timestamptz`,
        limit,
      });
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
          on conflict (key_id, mode) do nothing
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

export type AndroidKeyRepository = ReturnType<typeof createAndroidKeyRepository>;
