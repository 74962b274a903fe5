import { createHash } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { auditColumn, auditCte, logAudit, type Auditor } from './audit.js';
import { rowsOf, type Database } from './database.js';
import { SecretOpenError, type SecretBox } from './secretBox.js';
import { aadFor, MasterKeyError } from './secrets.js';

/** The development App Attest CA as stored: DER certificates and the intermediate's PKCS#8 key. */
export interface DevCaRecord {
  rootCert: Uint8Array;
  intermediateCert: Uint8Array;
  /** secret: signs minted attestation leaves */
  intermediateKey: Uint8Array;
  createdAt: Date;
}

interface Row {
  root_cert: Uint8Array;
  intermediate_cert: Uint8Array;
  intermediate_key: Uint8Array;
  master_key_id: string | null;
  created_at: Date | string;
}

// the one row's key, as the associated data of its sealed column names it
const AAD = aadFor('dev_ca', 'intermediate_key', ['1']);
const COLUMNS = sql`root_cert, intermediate_cert, intermediate_key, master_key_id, created_at`;

/**
 * The deployment's development CA (one row). The intermediate's private key is sealed with
 * `secrets` (the master key) like every stored secret; `null` for readers of the root alone.
 */
export function createDevCaRepository(db: Database, secrets: SecretBox | null = null) {
  const box = (): SecretBox => {
    if (!secrets)
      throw new MasterKeyError('the development CA key needs the master key, and none was given');
    return secrets;
  };
  const toRecord = (r: Row): DevCaRecord => {
    if (r.master_key_id === null)
      throw new MasterKeyError(
        'the development CA key is stored in clear: run "attest db migrate" to seal it',
      );
    let intermediateKey: Uint8Array;
    try {
      intermediateKey = box().open(
        { keyId: r.master_key_id, ciphertext: new Uint8Array(r.intermediate_key) },
        AAD,
      );
    } catch (err) {
      if (err instanceof SecretOpenError)
        throw new MasterKeyError(`cannot open the development CA key: ${err.message}`);
      throw err;
    }
    return {
      rootCert: new Uint8Array(r.root_cert),
      intermediateCert: new Uint8Array(r.intermediate_cert),
      intermediateKey,
      createdAt: new Date(r.created_at),
    };
  };
  return {
    /** the CA, or null before `attest dev init` */
    async get(): Promise<DevCaRecord | null> {
      const rows = rowsOf<Row>(await db.execute(sql`select ${COLUMNS} from dev_ca where id = 1`));
      return rows[0] ? toRecord(rows[0]) : null;
    },

    /** the root certificate only (what verifiers trust), without reading the secret column */
    async root(): Promise<Uint8Array | null> {
      const rows = rowsOf<{ root_cert: Uint8Array }>(
        await db.execute(sql`select root_cert from dev_ca where id = 1`),
      );
      return rows[0] ? new Uint8Array(rows[0].root_cert) : null;
    },

    /**
     * Stores `ca` unless one exists (`replace`: always). Returns the CA in force afterwards and
     * whether it is the one given, so racing `dev init` runs agree on one CA. With an auditor, the
     * same statement records `dev.init` or `dev.rotate` (root fingerprints, never the key).
     */
    async put(
      ca: Omit<DevCaRecord, 'createdAt'>,
      options: { replace: boolean },
      auditor?: Auditor,
    ): Promise<{ ca: DevCaRecord; stored: boolean }> {
      const sealed = box().seal(ca.intermediateKey, AAD);
      const values = sql`(1, ${Buffer.from(ca.rootCert)}, ${Buffer.from(ca.intermediateCert)}, ${Buffer.from(sealed.ciphertext)}, ${sealed.keyId})`;
      const rootSha256 = createHash('sha256').update(ca.rootCert).digest('hex');
      const rows = rowsOf<Row & { audit: unknown }>(
        await db.execute(sql`
          with b as (select encode(sha256(root_cert), 'hex') as root from dev_ca where id = 1),
          c as (
            insert into dev_ca (id, root_cert, intermediate_cert, intermediate_key, master_key_id) values ${values}
            ${
              options.replace
                ? sql`on conflict (id) do update set root_cert = excluded.root_cert, intermediate_cert = excluded.intermediate_cert,
                        intermediate_key = excluded.intermediate_key, master_key_id = excluded.master_key_id, created_at = now()`
                : sql`on conflict (id) do nothing`
            }
            returning ${COLUMNS}
          )${auditCte(
            auditor,
            (actor) => sql`
            select ${actor}, case when exists (select 1 from b) then 'dev.rotate' else 'dev.init' end, 'dev_ca',
                   (select jsonb_build_object('rootSha256', b.root) from b), jsonb_build_object('rootSha256', ${rootSha256}::text)
            from c`,
          )}
          select c.*, ${auditColumn(auditor)} as audit from c`),
      );
      if (rows[0]) {
        logAudit(auditor, rows[0].audit);
        return { ca: toRecord(rows[0]), stored: true };
      }
      return { ca: (await this.get())!, stored: false };
    },
  };
}

export type DevCaRepository = ReturnType<typeof createDevCaRepository>;
