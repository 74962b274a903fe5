import { createHash, createPrivateKey, createPublicKey, type KeyObject } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { auditColumn, auditCte, logAudit, type Auditor } from './audit.js';
import { rowsOf, type Database } from './database.js';
import { SecretOpenError, type SecretBox } from './secretBox.js';
import { aadFor, MasterKeyError } from './secrets.js';

const TABLE = 'apple_credentials';

/** A DeviceCheck key as `list` shows it: never the key itself. */
export interface AppleCredentialView {
  teamId: string;
  keyId: string;
  /** SHA-256 of the public key (SPKI DER), hex, first 16 characters */
  fingerprint: string;
  createdAt: Date;
  /** when Apple last refused it (401/403); null when it worked since */
  rejectedAt: Date | null;
}

/** A DeviceCheck key opened for signing the refresh JWT. A secret. */
export interface AppleCredential {
  teamId: string;
  keyId: string;
  privateKey: KeyObject;
}

/** A 10-character Apple team ID. */
export const APPLE_TEAM_ID = /^[A-Z0-9]{10}$/;
/** Apple's key IDs are 10 characters too. */
export const APPLE_KEY_ID = /^[A-Z0-9]{10}$/;

/**
 * Reads an `AuthKey_KID.p8` (PKCS#8 PEM of an EC P-256 key). Throws a one-line Error otherwise.
 * @param pem the file's text
 */
export function parseDeviceCheckKey(pem: string): KeyObject {
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: pem, format: 'pem' });
  } catch {
    throw new Error('not a PEM private key (an AuthKey_KEYID.p8 file from Apple)');
  }
  if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1')
    throw new Error('not an EC P-256 key: DeviceCheck keys are ES256');
  return key;
}

function fingerprintOf(key: KeyObject): string {
  const spki = createPublicKey(key).export({ type: 'spki', format: 'der' });
  return createHash('sha256').update(spki).digest('hex').slice(0, 16);
}

/**
 * DeviceCheck keys per team, sealed with the master key; each change is audited in its statement.
 * @param db the database
 * @param secrets the master key's box (null for list and remove, which open nothing)
 */
export function createAppleCredentialRepository(db: Database, secrets: SecretBox | null) {
  const box = (): SecretBox => {
    if (!secrets)
      throw new MasterKeyError('the DeviceCheck keys need the master key, and none was given');
    return secrets;
  };
  return {
    /** Adds or replaces a team's key; records `apple.credentials.add` / `.replace`. */
    async add(
      teamId: string,
      keyId: string,
      privateKey: KeyObject,
      auditor?: Auditor,
    ): Promise<{ result: 'added' | 'replaced'; fingerprint: string }> {
      const der = privateKey.export({ type: 'pkcs8', format: 'der' });
      const sealed = box().seal(new Uint8Array(der), aadFor(TABLE, 'private_key', [teamId]));
      const fingerprint = fingerprintOf(privateKey);
      const after = { keyId, fingerprint };
      const rows = rowsOf<{ inserted: boolean; audit: unknown }>(
        await db.execute(sql`
          with b as (select key_id from apple_credentials where team_id = ${teamId}),
          u as (
            insert into apple_credentials (team_id, key_id, private_key, master_key_id)
            values (${teamId}, ${keyId}, ${Buffer.from(sealed.ciphertext)}, ${sealed.keyId})
            on conflict (team_id) do update set key_id = excluded.key_id, private_key = excluded.private_key,
              master_key_id = excluded.master_key_id, rejected_at = null, created_at = now()
            returning (xmax = 0) as inserted
          )${auditCte(
            auditor,
            (actor) => sql`
            select ${actor}, case when u.inserted then 'apple.credentials.add' else 'apple.credentials.replace' end,
                   ${`apple-team:${teamId}`}, (select jsonb_build_object('keyId', b.key_id) from b),
                   ${JSON.stringify(after)}::jsonb
            from u`,
          )}
          select u.inserted, ${auditColumn(auditor)} as audit from u`),
      );
      logAudit(auditor, rows[0]!.audit);
      return { result: rows[0]!.inserted ? 'added' : 'replaced', fingerprint };
    },

    /** Removes a team's key; records `apple.credentials.remove`. False when there was none. */
    async remove(teamId: string, auditor?: Auditor): Promise<boolean> {
      const rows = rowsOf<{ audit: unknown }>(
        await db.execute(sql`
          with d as (delete from apple_credentials where team_id = ${teamId} returning key_id)${auditCte(
            auditor,
            (actor) => sql`
            select ${actor}, 'apple.credentials.remove', ${`apple-team:${teamId}`}, jsonb_build_object('keyId', d.key_id), null::jsonb from d`,
          )}
          select ${auditColumn(auditor)} as audit from d`),
      );
      if (rows.length === 1) logAudit(auditor, rows[0]!.audit);
      return rows.length === 1;
    },

    /** Every team's key, without key material (the fingerprint needs the box to open it). */
    async list(): Promise<AppleCredentialView[]> {
      const rows = rowsOf<CredentialRow>(
        await db.execute(
          sql`select team_id, key_id, private_key, master_key_id, created_at, rejected_at from apple_credentials order by team_id`,
        ),
      );
      return rows.map((row) => ({
        teamId: row.team_id,
        keyId: row.key_id,
        fingerprint: secrets ? fingerprintOf(open(row)) : '-',
        createdAt: new Date(row.created_at),
        rejectedAt: row.rejected_at === null ? null : new Date(row.rejected_at),
      }));
    },

    /** A team's key, opened; null when the team has none. */
    async get(teamId: string): Promise<AppleCredential | null> {
      const rows = rowsOf<CredentialRow>(
        await db.execute(
          sql`select team_id, key_id, private_key, master_key_id, created_at, rejected_at from apple_credentials where team_id = ${teamId}`,
        ),
      );
      const row = rows[0];
      return row ? { teamId: row.team_id, keyId: row.key_id, privateKey: open(row) } : null;
    },

    /**
     * Records that Apple refused the team's key. True only for the first refusal since it last
     * worked (or was added): the caller says so once, not once per key refreshed.
     */
    async markRejected(teamId: string, keyId: string): Promise<boolean> {
      const rows = rowsOf<{ team_id: string }>(
        await db.execute(sql`
          update apple_credentials set rejected_at = now()
          where team_id = ${teamId} and key_id = ${keyId} and rejected_at is null
          returning team_id`),
      );
      return rows.length === 1;
    },

    /** Apple accepted the team's key again. */
    async markAccepted(teamId: string): Promise<void> {
      await db.execute(
        sql`update apple_credentials set rejected_at = null where team_id = ${teamId} and rejected_at is not null`,
      );
    },
  };

  function open(row: CredentialRow): KeyObject {
    if (row.master_key_id === null)
      throw new MasterKeyError(
        `the DeviceCheck key of team ${row.team_id} is stored in clear: run "attest db migrate" to seal it`,
      );
    let der: Uint8Array;
    try {
      der = box().open(
        { keyId: row.master_key_id, ciphertext: new Uint8Array(row.private_key) },
        aadFor(TABLE, 'private_key', [row.team_id]),
      );
    } catch (err) {
      if (err instanceof SecretOpenError)
        throw new MasterKeyError(
          `cannot open the DeviceCheck key of team ${row.team_id}: ${err.message}`,
        );
      throw err;
    }
    return createPrivateKey({ key: Buffer.from(der), format: 'der', type: 'pkcs8' });
  }
}

interface CredentialRow {
  team_id: string;
  key_id: string;
  private_key: Uint8Array;
  master_key_id: string | null;
  created_at: Date | string;
  rejected_at: Date | string | null;
}

export type AppleCredentialRepository = ReturnType<typeof createAppleCredentialRepository>;
