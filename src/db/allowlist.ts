import { sql } from 'drizzle-orm';
import type {
  AllowlistReader,
  AndroidPackagePolicy,
  AppleAppPolicy,
  AppleEnvPolicy,
  DeviceActivityLevel,
  GoogleServiceAccount,
  MinVerdict,
} from '../core/types.js';
import { deserializeServiceAccount, serializeServiceAccount } from '../google/serviceAccount.js';
import { rowsOf, type Database } from './client.js';

export interface AndroidPolicyInput {
  certificateDigests?: Uint8Array[];
  minVerdict?: MinVerdict;
  allowUnrecognized?: boolean;
  maxAgeSeconds?: number;
  requireLicensed?: boolean;
  /** accepted Play Protect verdicts; `[]` stops checking */
  playProtectVerdicts?: string[];
  /** denied appsDetected values; `[]` stops checking */
  denyAppAccessRisk?: string[];
  /** `null` stops checking */
  maxDeviceActivity?: DeviceActivityLevel | null;
  /** `null` removes the stored service account */
  serviceAccount?: GoogleServiceAccount | null;
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
  require_licensed: boolean;
  play_protect_verdicts: string[] | string | null;
  deny_app_access_risk: string[] | string | null;
  max_device_activity: string | null;
  service_account: string | null;
}

interface PairRow {
  package_name: string;
  id: string;
  decryption_key: Uint8Array;
  verification_key: Uint8Array;
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
     * half-written. `pair` may be null for a package verified through Google only (standard
     * requests with a service account).
     */
    async addAndroid(
      packageName: string,
      pair: AndroidKeyPairInput | null,
      policy: AndroidPolicyInput,
    ): Promise<{ package: 'added' | 'updated'; pair: 'added' | 'exists' | 'none' }> {
      // sent as one text parameter: array parameters are bound differently by the two drivers
      const digests = policy.certificateDigests?.map((d) => Buffer.from(d).toString('hex'));
      const keep = (given: boolean, column: string) => (given ? sql.raw(`excluded.${column}`) : sql.raw(`android_packages.${column}`));
      const serviceAccount = policy.serviceAccount ? sealServiceAccount(policy.serviceAccount) : null;
      const pairInsert = pair
        ? sql`insert into android_key_pairs (package_name, id, decryption_key, verification_key)
            select package_name, ${pair.id}, ${Buffer.from(pair.decryptionKey)}, ${Buffer.from(pair.verificationKey)} from pkg
            on conflict (package_name, id) do nothing
            returning id`
        : sql`select null::text as id where false`;
      const rows = rowsOf<{ package_inserted: boolean; pair_added: boolean }>(
        await db.execute(sql`
          with pkg as (
            insert into android_packages (package_name, certificate_digests, min_verdict, allow_unrecognized, max_age_seconds,
                                          require_licensed, play_protect_verdicts, deny_app_access_risk, max_device_activity, service_account)
            values (${packageName},
                    ${textArray(digests)},
                    ${policy.minVerdict ?? 'MEETS_DEVICE_INTEGRITY'},
                    ${policy.allowUnrecognized ?? false},
                    ${policy.maxAgeSeconds ?? 600},
                    ${policy.requireLicensed ?? false},
                    ${textArray(policy.playProtectVerdicts)},
                    ${textArray(policy.denyAppAccessRisk)},
                    ${policy.maxDeviceActivity ?? null},
                    ${serviceAccount})
            on conflict (package_name) do update set
              certificate_digests = ${keep(digests !== undefined, 'certificate_digests')},
              min_verdict = ${keep(policy.minVerdict !== undefined, 'min_verdict')},
              allow_unrecognized = ${keep(policy.allowUnrecognized !== undefined, 'allow_unrecognized')},
              max_age_seconds = ${keep(policy.maxAgeSeconds !== undefined, 'max_age_seconds')},
              require_licensed = ${keep(policy.requireLicensed !== undefined, 'require_licensed')},
              play_protect_verdicts = ${keep(policy.playProtectVerdicts !== undefined, 'play_protect_verdicts')},
              deny_app_access_risk = ${keep(policy.denyAppAccessRisk !== undefined, 'deny_app_access_risk')},
              max_device_activity = ${keep(policy.maxDeviceActivity !== undefined, 'max_device_activity')},
              service_account = ${keep(policy.serviceAccount !== undefined, 'service_account')}
            returning package_name, (xmax = 0) as inserted
          ), pair as (${pairInsert})
          select (select inserted from pkg) as package_inserted, exists (select 1 from pair) as pair_added`),
      );
      return { package: rows[0]?.package_inserted ? 'added' : 'updated', pair: !pair ? 'none' : rows[0]?.pair_added ? 'added' : 'exists' };
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
        await db.execute(sql`
          select package_name, certificate_digests, min_verdict, allow_unrecognized, max_age_seconds,
                 require_licensed, play_protect_verdicts, deny_app_access_risk, max_device_activity, service_account
          from android_packages order by package_name`),
      );
      const pairs = rowsOf<PairRow>(
        await db.execute(sql`select package_name, id, decryption_key, verification_key from android_key_pairs order by created_at, id`),
      );
      return packages.map((p) => ({
        packageName: p.package_name,
        keys: pairs
          .filter((k) => k.package_name === p.package_name)
          .map((k) => ({ id: k.id, decryptionKey: new Uint8Array(k.decryption_key), verificationKey: new Uint8Array(k.verification_key) })),
        certificateDigests: parseDigests(p.certificate_digests),
        minVerdict: p.min_verdict as MinVerdict,
        allowUnrecognized: p.allow_unrecognized,
        maxAgeSeconds: p.max_age_seconds,
        requireLicensed: p.require_licensed,
        playProtectVerdicts: parseTextArray(p.play_protect_verdicts),
        denyAppAccessRisk: parseTextArray(p.deny_app_access_risk),
        maxDeviceActivity: p.max_device_activity as DeviceActivityLevel | null,
        serviceAccount: p.service_account === null ? null : openServiceAccount(p.package_name, p.service_account),
      }));
    },
  };
}

export type AllowlistRepository = ReturnType<typeof createAllowlistRepository>;

/** text[] of hex digests; a driver that does not parse arrays hands over the literal `{a,b}`. */
function parseDigests(value: string[] | string | null): Uint8Array[] {
  return parseTextArray(value).map((hex) => new Uint8Array(Buffer.from(hex, 'hex')));
}

/** A text[] of plain words (hex, enum values: nothing that needs quoting in the literal). */
function parseTextArray(value: string[] | string | null): string[] {
  return typeof value === 'string' ? value.replace(/^\{|\}$/g, '').split(',').filter(Boolean) : (value ?? []);
}

/** A text[] parameter sent as one text (the two drivers bind array parameters differently). */
function textArray(list: readonly string[] | undefined) {
  return list && list.length > 0 ? sql`string_to_array(${list.join(',')}, ',')` : sql`'{}'::text[]`;
}

/**
 * The service account is a secret: these two are the only places it is written and read, so
 * at-rest encryption of secret columns wraps them and nothing else.
 */
function sealServiceAccount(account: GoogleServiceAccount): string {
  return serializeServiceAccount(account);
}

function openServiceAccount(packageName: string, stored: string): GoogleServiceAccount {
  try {
    return deserializeServiceAccount(stored);
  } catch {
    throw new Error(`allowlist entry ${packageName}: the stored service account cannot be read`);
  }
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
