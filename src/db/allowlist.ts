import { sql } from 'drizzle-orm';
import type { AllowlistReader, AndroidPackagePolicy, AppleAppPolicy, AppleEnvPolicy, MinVerdict } from '../core/types.js';
import { rowsOf, type Database } from './client.js';

export interface AndroidPolicyInput {
  certificateDigests?: Uint8Array[];
  minVerdict?: MinVerdict;
  allowUnrecognized?: boolean;
  maxAgeSeconds?: number;
}

export interface AndroidKeyPairInput {
  id: string;
  decryptionKey: Uint8Array;
  verificationKey: Uint8Array;
}

interface PackageRow {
  package_name: string;
  certificate_digests: string[] | string | null;
  min_verdict: string;
  allow_unrecognized: boolean;
  max_age_seconds: number;
}

interface PairRow {
  package_name: string;
  id: string;
  decryption_key: Uint8Array;
  verification_key: Uint8Array;
  test_only: boolean;
}

/** A test-only Play Integrity pair with the signing half that Google would hold. */
export interface TestKeyPair extends AndroidKeyPairInput {
  /** PKCS#8 DER of the EC P-256 signing key */
  signingKey: Uint8Array;
}

/** The allowlist: App Attest app IDs and Play Integrity packages with their keys and policy. */
export function createAllowlistRepository(db: Database) {
  return {
    async addApple(appId: string, env: AppleEnvPolicy): Promise<'added' | 'updated'> {
      const rows = rowsOf<{ inserted: boolean }>(
        await db.execute(sql`
          insert into apple_apps (app_id, env) values (${appId}, ${env})
          on conflict (app_id) do update set env = excluded.env
          returning (xmax = 0) as inserted`),
      );
      return rows[0]?.inserted ? 'added' : 'updated';
    },

    async removeApple(appId: string): Promise<boolean> {
      return rowsOf(await db.execute(sql`delete from apple_apps where app_id = ${appId} returning app_id`)).length === 1;
    },

    async listApple(): Promise<AppleAppPolicy[]> {
      const rows = rowsOf<{ app_id: string; env: string }>(await db.execute(sql`select app_id, env from apple_apps order by app_id`));
      return rows.map((r) => ({ appId: r.app_id, env: r.env as AppleEnvPolicy }));
    },

    /**
     * Adds a package, or a key pair to an existing one (key rotation): the policy fields given
     * replace the stored ones, those not given stay. One statement, so a package never exists
     * half-written.
     */
    async addAndroid(packageName: string, pair: AndroidKeyPairInput | null, policy: AndroidPolicyInput): Promise<{ package: 'added' | 'updated'; pair: 'added' | 'exists' | 'none' }> {
      // sent as one text parameter: array parameters are bound differently by the two drivers
      const digests = policy.certificateDigests?.map((d) => Buffer.from(d).toString('hex')).join(',');
      const rows = rowsOf<{ package_inserted: boolean; pair_added: boolean }>(
        await db.execute(sql`
          with pkg as (
            insert into android_packages (package_name, certificate_digests, min_verdict, allow_unrecognized, max_age_seconds)
            values (${packageName},
                    ${digests !== undefined ? sql`string_to_array(${digests}, ',')` : sql`'{}'::text[]`},
                    ${policy.minVerdict ?? 'MEETS_DEVICE_INTEGRITY'},
                    ${policy.allowUnrecognized ?? false},
                    ${policy.maxAgeSeconds ?? 600})
            on conflict (package_name) do update set
              certificate_digests = ${digests !== undefined ? sql`excluded.certificate_digests` : sql`android_packages.certificate_digests`},
              min_verdict = ${policy.minVerdict ? sql`excluded.min_verdict` : sql`android_packages.min_verdict`},
              allow_unrecognized = ${policy.allowUnrecognized !== undefined ? sql`excluded.allow_unrecognized` : sql`android_packages.allow_unrecognized`},
              max_age_seconds = ${policy.maxAgeSeconds !== undefined ? sql`excluded.max_age_seconds` : sql`android_packages.max_age_seconds`}
            returning package_name, (xmax = 0) as inserted
          ), pair as (
            ${
              pair
                ? sql`insert into android_key_pairs (package_name, id, decryption_key, verification_key)
                      select package_name, ${pair.id}, ${Buffer.from(pair.decryptionKey)}, ${Buffer.from(pair.verificationKey)} from pkg
                      on conflict (package_name, id) do nothing
                      returning id`
                : sql`select id from android_key_pairs where false`
            }
          )
          select (select inserted from pkg) as package_inserted, exists (select 1 from pair) as pair_added`),
      );
      return { package: rows[0]?.package_inserted ? 'added' : 'updated', pair: !pair ? 'none' : rows[0]?.pair_added ? 'added' : 'exists' };
    },

    /**
     * The package's test-only pair with its signing key, made with `make` the first time. `null`
     * when the package is not allowlisted. Racing first calls keep one pair (unique index).
     */
    async ensureTestPair(packageName: string, make: () => Promise<TestKeyPair>): Promise<{ pair: TestKeyPair; created: boolean } | null> {
      const read = async () =>
        rowsOf<{ id: string; decryption_key: Uint8Array; verification_key: Uint8Array; signing_key: Uint8Array }>(
          await db.execute(sql`
            select id, decryption_key, verification_key, signing_key from android_key_pairs
            where package_name = ${packageName} and test_only and signing_key is not null`),
        )[0];
      const toPair = (r: NonNullable<Awaited<ReturnType<typeof read>>>): TestKeyPair => ({
        id: r.id,
        decryptionKey: new Uint8Array(r.decryption_key),
        verificationKey: new Uint8Array(r.verification_key),
        signingKey: new Uint8Array(r.signing_key),
      });
      const existing = await read();
      if (existing) return { pair: toPair(existing), created: false };
      const fresh = await make();
      const inserted = rowsOf<{ id: string }>(
        await db.execute(sql`
          insert into android_key_pairs (package_name, id, decryption_key, verification_key, test_only, signing_key)
          select package_name, ${fresh.id}, ${Buffer.from(fresh.decryptionKey)}, ${Buffer.from(fresh.verificationKey)}, true, ${Buffer.from(fresh.signingKey)}
          from android_packages where package_name = ${packageName}
          on conflict do nothing
          returning id`),
      );
      if (inserted.length === 1) return { pair: fresh, created: true };
      const winner = await read();
      return winner ? { pair: toPair(winner), created: false } : null;
    },

    /** Removes a whole package (with its keys), or with `pairId` retires one key pair of it. */
    async removeAndroid(packageName: string, pairId?: string): Promise<boolean> {
      const result = pairId
        ? await db.execute(sql`delete from android_key_pairs where package_name = ${packageName} and id = ${pairId} returning id`)
        : await db.execute(sql`delete from android_packages where package_name = ${packageName} returning package_name`);
      return rowsOf(result).length === 1;
    },

    async listAndroid(): Promise<AndroidPackagePolicy[]> {
      const packages = rowsOf<PackageRow>(
        await db.execute(sql`select package_name, certificate_digests, min_verdict, allow_unrecognized, max_age_seconds from android_packages order by package_name`),
      );
      const pairs = rowsOf<PairRow>(
        await db.execute(sql`select package_name, id, decryption_key, verification_key, test_only from android_key_pairs order by created_at, id`),
      );
      return packages.map((p) => ({
        packageName: p.package_name,
        keys: pairs
          .filter((k) => k.package_name === p.package_name)
          .map((k) => ({
            id: k.id,
            decryptionKey: new Uint8Array(k.decryption_key),
            verificationKey: new Uint8Array(k.verification_key),
            ...(k.test_only ? { testOnly: true } : {}),
          })),
        certificateDigests: parseDigests(p.certificate_digests),
        minVerdict: p.min_verdict as MinVerdict,
        allowUnrecognized: p.allow_unrecognized,
        maxAgeSeconds: p.max_age_seconds,
      }));
    },
  };
}

export type AllowlistRepository = ReturnType<typeof createAllowlistRepository>;

/** text[] of hex digests; a driver that does not parse arrays hands over the literal `{a,b}`. */
function parseDigests(value: string[] | string | null): Uint8Array[] {
  const list = typeof value === 'string' ? value.replace(/^\{|\}$/g, '').split(',').filter(Boolean) : (value ?? []);
  return list.map((hex) => new Uint8Array(Buffer.from(hex, 'hex')));
}

/**
 * The allowlist as the verifiers read it: a snapshot re-read at most every `ttlMs`, so removing
 * an app or package takes effect on every instance within that time without a query per token.
 */
export function createCachedAllowlist(repo: AllowlistRepository, options: { ttlMs: number; now?: () => number }): AllowlistReader & { invalidate(): void } {
  const now = options.now ?? Date.now;
  interface Snapshot {
    at: number;
    apple: AppleAppPolicy[];
    android: AndroidPackagePolicy[];
  }
  let snapshot: Snapshot | null = null;
  let loading: Promise<Snapshot> | null = null;
  const current = async (): Promise<Snapshot> => {
    if (snapshot && now() - snapshot.at < options.ttlMs) return snapshot;
    // one reload at a time; concurrent readers share it
    loading ??= (async () => {
      try {
        const [apple, android] = await Promise.all([repo.listApple(), repo.listAndroid()]);
        const loaded: Snapshot = { at: now(), apple, android };
        snapshot = loaded;
        return loaded;
      } finally {
        loading = null;
      }
    })();
    return loading;
  };
  return {
    appleApp: async (appId) => (await current()).apple.find((a) => a.appId === appId) ?? null,
    appleApps: async () => (await current()).apple,
    androidPackage: async (name) => (await current()).android.find((p) => p.packageName === name) ?? null,
    androidPackages: async () => (await current()).android,
    invalidate: () => {
      snapshot = null;
    },
  };
}
