import { sql } from 'drizzle-orm';
import { rowsOf, type Database } from './client.js';

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
  created_at: Date | string;
}

const toRecord = (r: Row): DevCaRecord => ({
  rootCert: new Uint8Array(r.root_cert),
  intermediateCert: new Uint8Array(r.intermediate_cert),
  intermediateKey: new Uint8Array(r.intermediate_key),
  createdAt: new Date(r.created_at),
});

/** The deployment's development CA (one row); secret columns are read and written only here. */
export function createDevCaRepository(db: Database) {
  return {
    /** the CA, or null before `attest dev init` */
    async get(): Promise<DevCaRecord | null> {
      const rows = rowsOf<Row>(await db.execute(sql`select root_cert, intermediate_cert, intermediate_key, created_at from dev_ca where id = 1`));
      return rows[0] ? toRecord(rows[0]) : null;
    },

    /** the root certificate only (what verifiers trust), without reading the secret column */
    async root(): Promise<Uint8Array | null> {
      const rows = rowsOf<{ root_cert: Uint8Array }>(await db.execute(sql`select root_cert from dev_ca where id = 1`));
      return rows[0] ? new Uint8Array(rows[0].root_cert) : null;
    },

    /**
     * Stores `ca` unless one exists (`replace`: always). Returns the CA in force afterwards and
     * whether it is the one given, so racing `dev init` runs agree on one CA.
     */
    async put(ca: Omit<DevCaRecord, 'createdAt'>, options: { replace: boolean }): Promise<{ ca: DevCaRecord; stored: boolean }> {
      const values = sql`(1, ${Buffer.from(ca.rootCert)}, ${Buffer.from(ca.intermediateCert)}, ${Buffer.from(ca.intermediateKey)})`;
      const rows = rowsOf<Row>(
        await db.execute(
          options.replace
            ? sql`insert into dev_ca (id, root_cert, intermediate_cert, intermediate_key) values ${values}
                  on conflict (id) do update set root_cert = excluded.root_cert, intermediate_cert = excluded.intermediate_cert,
                    intermediate_key = excluded.intermediate_key, created_at = now()
                  returning root_cert, intermediate_cert, intermediate_key, created_at`
            : sql`insert into dev_ca (id, root_cert, intermediate_cert, intermediate_key) values ${values}
                  on conflict (id) do nothing
                  returning root_cert, intermediate_cert, intermediate_key, created_at`,
        ),
      );
      if (rows[0]) return { ca: toRecord(rows[0]), stored: true };
      return { ca: (await this.get())!, stored: false };
    },
  };
}

export type DevCaRepository = ReturnType<typeof createDevCaRepository>;
