import { sql } from 'drizzle-orm';
import { auditColumn, auditCte, logAudit, type Auditor } from './audit.js';
import { rowsOf, type Database } from './database.js';
import { SecretOpenError, type SecretBox } from './secretBox.js';
import { aadFor, MasterKeyError } from './secrets.js';

/** A new signing key, as `newResultSigningKey` makes it. */
export interface NewResultKey {
  /** the `kid` (RFC 7638 thumbprint) */
  id: string;
  /** DER SubjectPublicKeyInfo */
  publicKey: Uint8Array;
  /** PKCS#8 DER; secret */
  privateKey: Uint8Array;
}

/**
 * A stored signing key as one instance reads it. Times come both as dates and relative to the
 * database's clock at the read (`signingInMs`, `retiredMsAgo`), so an instance whose own clock
 * is off still starts and stops signing when the database says.
 */
export interface ResultKeyRecord {
  id: string;
  /** 'test': signs the tokens of test-mode API keys, published at the test JWKS only */
  mode: ResultKeyMode;
  publicKey: Uint8Array;
  createdAt: Date;
  signingFrom: Date;
  /** when the next key starts (or started) signing; null for the newest key */
  retiredAt: Date | null;
  /** milliseconds from the read until the key signs (0 or less: it signs, or did) */
  signingInMs: number;
  /** milliseconds since it was retired at the read (negative: retired in the future); null: not retired */
  retiredMsAgo: number | null;
  /** the private key, sealed; opened with `open` */
  sealed: { keyId: string | null; ciphertext: Uint8Array };
}

/** Which API keys a signing key serves: live keys, or test-mode keys (never both). */
export type ResultKeyMode = 'live' | 'test';

interface Row {
  id: string;
  mode: string;
  public_key: Uint8Array;
  private_key: Uint8Array;
  master_key_id: string | null;
  created_at: Date | string;
  signing_from: Date | string;
  retired_at: Date | string | null;
  signing_in_ms: number | string;
  retired_ms_ago: number | string | null;
}

const aad = (id: string) => aadFor('result_signing_keys', 'private_key', [id]);

// each key is retired when the key after it of the same mode (in signing order) starts signing
const KEYS_WITH_RETIREMENT = sql`(
  select k.*, lead(k.signing_from) over (partition by k.mode order by k.signing_from, k.created_at, k.id) as retired_at
  from result_signing_keys k
) r`;

const toRecord = (r: Row): ResultKeyRecord => ({
  id: r.id,
  mode: r.mode === 'test' ? 'test' : 'live',
  publicKey: new Uint8Array(r.public_key),
  createdAt: new Date(r.created_at),
  signingFrom: new Date(r.signing_from),
  retiredAt: r.retired_at === null ? null : new Date(r.retired_at),
  signingInMs: Number(r.signing_in_ms),
  retiredMsAgo: r.retired_ms_ago === null ? null : Number(r.retired_ms_ago),
  sealed: { keyId: r.master_key_id, ciphertext: new Uint8Array(r.private_key) },
});

/**
 * The keys that sign result tokens. Private keys are sealed under the master key (`secrets`;
 * readers of public keys alone may pass null). Adding a key is one INSERT, so two rotations at
 * once each add a key and the later one wins; nothing is ever updated.
 */
export function createResultKeyRepository(db: Database, secrets: SecretBox | null = null) {
  const box = (): SecretBox => {
    if (!secrets)
      throw new MasterKeyError('result signing keys need the master key, and none was given');
    return secrets;
  };

  async function insert(
    key: NewResultKey,
    options: { delaySeconds: number; onlyIfNone: boolean; action: string; mode: ResultKeyMode },
    auditor?: Auditor,
  ): Promise<ResultKeyRecord | null> {
    const sealed = box().seal(key.privateKey, aad(key.id));
    // the first key signs at once: no instance signs with anything before it exists
    const rows = rowsOf<Row & { audit: unknown }>(
      await db.execute(sql`
        with prev as (
          select id from result_signing_keys where mode = ${options.mode} order by signing_from desc, created_at desc, id desc limit 1
        ),
        k as (
          insert into result_signing_keys (id, mode, public_key, private_key, master_key_id, signing_from)
          select ${key.id}, ${options.mode}, ${Buffer.from(key.publicKey)}, ${Buffer.from(sealed.ciphertext)}, ${sealed.keyId},
                 case when exists (select 1 from prev) then now() + make_interval(secs => ${options.delaySeconds}) else now() end
          ${options.onlyIfNone ? sql`where not exists (select 1 from prev)` : sql``}
          returning *
        )${auditCte(
          auditor,
          (actor) => sql`
          select ${actor}, ${options.action}, k.id, (select jsonb_build_object('kid', prev.id) from prev),
                 jsonb_build_object('kid', k.id, 'mode', k.mode, 'signingFrom', k.signing_from) from k`,
        )}
        select k.*, null::timestamptz as retired_at,
               extract(epoch from (k.signing_from - now())) * 1000 as signing_in_ms,
               null::float8 as retired_ms_ago, ${auditColumn(auditor)} as audit
        from k`),
    );
    if (!rows[0]) return null;
    logAudit(auditor, rows[0].audit);
    return toRecord(rows[0]);
  }

  return {
    /**
     * Adds a key that becomes the signing key `delaySeconds` after now (database clock); the
     * first key of all signs at once. With an auditor, the same statement records
     * `result_keys.rotate` (key ids, never key bytes). `mode` 'test' rotates the test keys only.
     */
    rotate(
      key: NewResultKey,
      delaySeconds: number,
      auditor?: Auditor,
      mode: ResultKeyMode = 'live',
    ) {
      return insert(
        key,
        { delaySeconds, onlyIfNone: false, action: 'result_keys.rotate', mode },
        auditor,
      ) as Promise<ResultKeyRecord>;
    },

    /** Adds `key` as the first key of `mode` when there is none (null when there already is one); records `result_keys.create`. */
    createFirst(key: NewResultKey, auditor?: Auditor, mode: ResultKeyMode = 'live') {
      return insert(
        key,
        { delaySeconds: 0, onlyIfNone: true, action: 'result_keys.create', mode },
        auditor,
      );
    },

    /**
     * Keys in signing order. `publishedWithinSeconds`: only the newest key and those retired
     * less than that long ago (database clock); absent: every key. `mode`: only keys of that
     * mode; absent: both.
     */
    async list(publishedWithinSeconds?: number, mode?: ResultKeyMode): Promise<ResultKeyRecord[]> {
      return rowsOf<Row>(
        await db.execute(sql`
          select r.*,
                 extract(epoch from (r.signing_from - now())) * 1000 as signing_in_ms,
                 extract(epoch from (now() - r.retired_at)) * 1000 as retired_ms_ago
          from ${KEYS_WITH_RETIREMENT}
          ${
            publishedWithinSeconds === undefined
              ? sql``
              : sql`where (r.retired_at is null or r.retired_at > now() - make_interval(secs => ${publishedWithinSeconds}))`
          }
          ${mode === undefined ? sql`` : publishedWithinSeconds === undefined ? sql`where r.mode = ${mode}` : sql`and r.mode = ${mode}`}
          order by r.mode, r.signing_from, r.created_at, r.id`),
      ).map(toRecord);
    },

    /** The PKCS#8 DER of a key's private half. */
    open(record: ResultKeyRecord): Uint8Array {
      if (record.sealed.keyId === null)
        throw new MasterKeyError(
          `result signing key ${record.id} is stored in clear: run "attest db migrate" to seal it`,
        );
      try {
        return box().open(
          { keyId: record.sealed.keyId, ciphertext: record.sealed.ciphertext },
          aad(record.id),
        );
      } catch (err) {
        if (err instanceof SecretOpenError)
          throw new MasterKeyError(`cannot open result signing key ${record.id}: ${err.message}`);
        throw err;
      }
    },
  };
}

export type ResultKeyRepository = ReturnType<typeof createResultKeyRepository>;
