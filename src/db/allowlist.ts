import { sql } from 'drizzle-orm';
import type {
  AndroidPackagePolicy,
  AppleAppPolicy,
  AppleEnvPolicy,
  GoogleServiceAccount,
  MinVerdict,
} from '../core/ports.js';
import { DEFAULT_ANDROID_POLICY } from '../core/gms/defaultAndroidPolicy.js';
import {
  deserializeServiceAccount,
  serializeServiceAccount,
} from '../upstream/googleServiceAccount.js';
import {
  androidSummary,
  pairsBefore,
  parseDigests,
  serviceAccountFingerprint,
  type AndroidKeyPairInput,
  type AndroidPolicyInput,
  type PackageRow,
  type PairRow,
  tableRuleColumns,
  type TestKeyPair,
} from './androidPackageRows.js';
import {
  appleAppOf,
  appleRuleColumns,
  deviceLimitOf,
  type AppleAppRow,
  type ApplePolicyInput,
} from './appleAppRows.js';
import { auditColumn, auditCte, logAudit, type Auditor } from './audit.js';
import { auditSummary } from './auditedColumns.js';
import { observeValue } from './observeColumn.js';
import {
  ANDROID_RULES,
  APPLE_RULES,
  ruleColumnList,
  ruleColumnNames,
  ruleUpdates,
  ruleValues,
  ruleValuesOf,
} from './policyColumns.js';
import { rowsOf, type Database } from './database.js';
import { SecretOpenError, type SecretBox } from './secretBox.js';
import { aadFor, MasterKeyError } from './secrets.js';
import { parseTextArray, textArray } from './textArray.js';

const PAIRS = 'android_key_pairs';
const PACKAGES = 'android_packages';

/**
 * The allowlist: App Attest app IDs and Play Integrity packages with their keys and policy. The
 * Play Integrity keys are sealed with `secrets` (the master key) before they reach the database;
 * `null` for callers that never touch them (Apple entries, removals).
 */
/** The rules an Android package's tables declare (read from their columns by the tables). */
type AndroidRules = Pick<
  AndroidPackagePolicy,
  | 'requireLicensed'
  | 'playProtectVerdicts'
  | 'denyAppAccessRisk'
  | 'maxDeviceActivity'
  | 'denyRecallBits'
  | 'minAccountActivity'
  | 'denyLocationSpoofing'
  | 'keyAttestation'
  | 'minSecurityLevel'
  | 'allowUnlocked'
  | 'bootKeys'
  | 'maxPatchAgeMonths'
>;

export function createAllowlistRepository(db: Database, secrets: SecretBox | null) {
  const box = (): SecretBox => {
    if (!secrets)
      throw new MasterKeyError('the Play Integrity keys need the master key, and none was given');
    return secrets;
  };
  const open = (
    row: PairRow & { signing_key?: Uint8Array },
    column: 'decryption_key' | 'verification_key' | 'signing_key',
  ): Uint8Array => {
    if (row.master_key_id === null)
      throw new MasterKeyError(
        `key pair ${row.id} of ${row.package_name} is stored in clear: run "attest db migrate" to seal it`,
      );
    try {
      return box().open(
        { keyId: row.master_key_id, ciphertext: new Uint8Array(row[column]!) },
        aadFor(PAIRS, column, [row.package_name, row.id]),
      );
    } catch (err) {
      // another instance rotated the master key: this one must be restarted with the new key
      if (err instanceof SecretOpenError)
        throw new MasterKeyError(
          `cannot open key pair ${row.id} of ${row.package_name}: ${err.message}`,
        );
      throw err;
    }
  };
  // the service account is a secret too: sealed and opened only here
  const sealServiceAccount = (packageName: string, account: GoogleServiceAccount) => {
    const sealed = box().seal(
      new TextEncoder().encode(serializeServiceAccount(account)),
      aadFor(PACKAGES, 'service_account', [packageName]),
    );
    return {
      ciphertext: Buffer.from(sealed.ciphertext),
      keyId: sealed.keyId,
      fingerprint: serviceAccountFingerprint(account),
    };
  };
  const openServiceAccount = (
    packageName: string,
    stored: Uint8Array,
    keyId: string | null,
  ): GoogleServiceAccount => {
    if (keyId === null)
      throw new MasterKeyError(
        `the service account of ${packageName} is stored in clear: run "attest db migrate" to seal it`,
      );
    let text: string;
    try {
      text = new TextDecoder().decode(
        box().open(
          { keyId, ciphertext: new Uint8Array(stored) },
          aadFor(PACKAGES, 'service_account', [packageName]),
        ),
      );
    } catch (err) {
      if (err instanceof SecretOpenError)
        throw new MasterKeyError(
          `cannot open the service account of ${packageName}: ${err.message}`,
        );
      throw err;
    }
    try {
      return deserializeServiceAccount(text);
    } catch {
      throw new Error(`allowlist entry ${packageName}: the stored service account cannot be read`);
    }
  };
  return {
    /**
     * Adds an app, or on an existing one sets `env` and each policy field given (else keeps the
     * stored ones). With an auditor, the same statement records `allowlist.add` or
     * `allowlist.update` with every field before and after (no event when nothing changed).
     */
    async addApple(
      appId: string,
      env: AppleEnvPolicy | undefined,
      auditor?: Auditor,
      policy: ApplePolicyInput = {},
    ): Promise<{
      result: 'added' | 'updated' | 'unchanged';
      env: AppleEnvPolicy;
      policy: AppleAppPolicy;
    }> {
      const given = env ?? null;
      const p = policy;
      const rules = appleRuleColumns(p);
      const rows = rowsOf<{ inserted: boolean; changed: boolean; audit: unknown } & AppleAppRow>(
        await db.execute(sql`
          with b as (select ${auditSummary('apple_apps', sql`x`)} as summary from apple_apps x where app_id = ${appId}),
          u as (
            insert into apple_apps (app_id, env, ${ruleColumnNames(rules)}, observe, max_verifies_per_device, device_window_seconds)
            values (${appId}, coalesce(${given}::text, 'production'), ${ruleValues(rules)},
              ${observeValue('apple', null, p.observeChange ?? {})},
              ${p.maxVerifiesPerDevice?.max ?? null}::integer, ${p.maxVerifiesPerDevice?.periodSeconds ?? null}::integer)
            on conflict (app_id) do update set
              env = coalesce(${given}::text, apple_apps.env),
              ${ruleUpdates(rules, 'apple_apps')},
              observe = ${observeValue('apple', sql`apple_apps.observe`, p.observeChange ?? {})},
              max_verifies_per_device = case when ${p.maxVerifiesPerDevice !== undefined} then ${p.maxVerifiesPerDevice?.max ?? null}::integer else apple_apps.max_verifies_per_device end,
              device_window_seconds = case when ${p.maxVerifiesPerDevice !== undefined} then ${p.maxVerifiesPerDevice?.periodSeconds ?? null}::integer else apple_apps.device_window_seconds end
            returning *, (xmax = 0) as inserted
          ),
          a as (
            select u.inserted, (select summary from b) as before, ${auditSummary('apple_apps', sql`u`)} as after from u
          )${auditCte(
            auditor,
            (actor) => sql`
            select ${actor}, case when a.inserted then 'allowlist.add' else 'allowlist.update' end, ${`apple:${appId}`},
                   a.before, a.after
            from a where a.inserted or a.before is distinct from a.after`,
          )}
          select u.inserted, (a.inserted or a.before is distinct from a.after) as changed, u.app_id, u.env, ${ruleColumnList(APPLE_RULES, 'u')}, u.observe, u.max_verifies_per_device, u.device_window_seconds, ${auditColumn(auditor)} as audit from u, a`),
      );
      logAudit(auditor, rows[0]!.audit);
      const stored = appleAppOf(rows[0]!);
      return {
        result: rows[0]!.inserted ? 'added' : rows[0]!.changed ? 'updated' : 'unchanged',
        env: stored.env,
        policy: stored,
      };
    },

    /** With an auditor, the same statement records `allowlist.remove`. */
    async removeApple(appId: string, auditor?: Auditor): Promise<boolean> {
      const rows = rowsOf<{ audit: unknown }>(
        await db.execute(sql`
          with d as (delete from apple_apps where app_id = ${appId} returning *)${auditCte(
            auditor,
            (actor) => sql`
            select ${actor}, 'allowlist.remove', ${`apple:${appId}`}, ${auditSummary('apple_apps', sql`d`)}, null::jsonb from d`,
          )}
          select ${auditColumn(auditor)} as audit from d`),
      );
      if (rows.length === 1) logAudit(auditor, rows[0]!.audit);
      return rows.length === 1;
    },

    /** The allowlisted app IDs and package names only (no secret is read): for shell completion. */
    async listIds(): Promise<{ apple: string[]; android: string[] }> {
      const apple = rowsOf<{ id: string }>(
        await db.execute(sql`select app_id as id from apple_apps order by app_id`),
      );
      const android = rowsOf<{ id: string }>(
        await db.execute(
          sql`select package_name as id from android_packages order by package_name`,
        ),
      );
      return { apple: apple.map((r) => r.id), android: android.map((r) => r.id) };
    },

    async listApple(): Promise<AppleAppPolicy[]> {
      const rows = rowsOf<AppleAppRow>(
        await db.execute(
          sql`select app_id, env, ${ruleColumnList(APPLE_RULES)}, observe, max_verifies_per_device,
                device_window_seconds from apple_apps order by app_id`,
        ),
      );
      return rows.map(appleAppOf);
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
      auditor?: Auditor,
    ): Promise<{
      package: 'added' | 'updated' | 'unchanged';
      pair: 'added' | 'exists' | 'none';
      observe: string[];
    }> {
      // sent as one text parameter: array parameters are bound differently by the two drivers
      const digests = policy.certificateDigests?.map((d) => Buffer.from(d).toString('hex'));
      const rules = tableRuleColumns(policy);
      const keep = (given: boolean, column: string) =>
        given ? sql.raw(`excluded.${column}`) : sql.raw(`android_packages.${column}`);
      const serviceAccount = policy.serviceAccount
        ? sealServiceAccount(packageName, policy.serviceAccount)
        : null;
      const target = `android:${packageName}`;
      let sealedPair: {
        id: string;
        decryption: Buffer;
        verification: Buffer;
        keyId: string;
      } | null = null;
      if (pair) {
        const secrets = box();
        const seal = (value: Uint8Array, column: string) =>
          Buffer.from(
            secrets.seal(value, aadFor(PAIRS, column, [packageName, pair.id])).ciphertext,
          );
        sealedPair = {
          id: pair.id,
          decryption: seal(pair.decryptionKey, 'decryption_key'),
          verification: seal(pair.verificationKey, 'verification_key'),
          keyId: secrets.keyId,
        };
      }
      const rows = rowsOf<{
        package_inserted: boolean;
        pair_added: boolean;
        changed: boolean;
        observe: string[] | string | null;
        audit: unknown;
      }>(
        await db.execute(sql`
          with ${pairsBefore(packageName)},
          b as (select ${androidSummary(sql`p`, sql`pairs.ids`, sql`pairs.test_ids`)} as summary from android_packages p, pairs where p.package_name = ${packageName}),
          pkg as (
            insert into android_packages (package_name, certificate_digests, min_verdict, allow_unrecognized, max_age_seconds,
                                          service_account, service_account_key_id, service_account_fingerprint,
                                          ${ruleColumnNames(rules)}, observe, max_verifies_per_device, device_window_seconds)
            values (${packageName},
                    ${textArray(digests)},
                    ${policy.minVerdict ?? DEFAULT_ANDROID_POLICY.minVerdict},
                    ${policy.allowUnrecognized ?? DEFAULT_ANDROID_POLICY.allowUnrecognized},
                    ${policy.maxAgeSeconds ?? DEFAULT_ANDROID_POLICY.maxAgeSeconds},
                    ${serviceAccount?.ciphertext ?? null},
                    ${serviceAccount?.keyId ?? null},
                    ${serviceAccount?.fingerprint ?? null},
                    ${ruleValues(rules)},
                    ${observeValue('android', null, policy.observeChange ?? {})},
                    ${policy.maxVerifiesPerDevice?.max ?? null}::integer, ${policy.maxVerifiesPerDevice?.periodSeconds ?? null}::integer)
            on conflict (package_name) do update set
              certificate_digests = ${keep(digests !== undefined, 'certificate_digests')},
              min_verdict = ${keep(policy.minVerdict !== undefined, 'min_verdict')},
              allow_unrecognized = ${keep(policy.allowUnrecognized !== undefined, 'allow_unrecognized')},
              max_age_seconds = ${keep(policy.maxAgeSeconds !== undefined, 'max_age_seconds')},
              service_account = ${keep(policy.serviceAccount !== undefined, 'service_account')},
              service_account_key_id = ${keep(policy.serviceAccount !== undefined, 'service_account_key_id')},
              service_account_fingerprint = ${keep(policy.serviceAccount !== undefined, 'service_account_fingerprint')},
              ${ruleUpdates(rules, 'android_packages')},
              observe = ${observeValue('android', sql`android_packages.observe`, policy.observeChange ?? {})},
              max_verifies_per_device = ${keep(policy.maxVerifiesPerDevice !== undefined, 'max_verifies_per_device')},
              device_window_seconds = ${keep(policy.maxVerifiesPerDevice !== undefined, 'device_window_seconds')}
            returning *, (xmax = 0) as inserted
          ), pair as (
            ${
              sealedPair
                ? sql`insert into android_key_pairs (package_name, id, decryption_key, verification_key, master_key_id)
                      select package_name, ${sealedPair.id}, ${sealedPair.decryption}, ${sealedPair.verification}, ${sealedPair.keyId} from pkg
                      on conflict (package_name, id) do nothing
                      returning id`
                : sql`select id from android_key_pairs where false`
            }
          ), a as (
            select pkg.inserted, (select summary from b) as before,
                   ${androidSummary(sql`pkg`, sql`pairs.ids || (case when exists (select 1 from pair) then jsonb_build_array(${pair?.id ?? ''}::text) else '[]'::jsonb end)`, sql`pairs.test_ids`)} as after
            from pkg, pairs
          )${auditCte(
            auditor,
            (actor) => sql`
            select ${actor},
                   case when a.inserted then 'allowlist.add' when exists (select 1 from pair) then 'allowlist.key.add' else 'allowlist.update' end,
                   ${target}, a.before, a.after
            from a where a.inserted or a.before is distinct from a.after`,
          )}
          select (select inserted from pkg) as package_inserted, exists (select 1 from pair) as pair_added,
                 (select a.before is distinct from a.after from a) as changed, (select observe from pkg) as observe,
                 ${auditColumn(auditor)} as audit`),
      );
      logAudit(auditor, rows[0]?.audit);
      return {
        package: rows[0]?.package_inserted ? 'added' : rows[0]?.changed ? 'updated' : 'unchanged',
        pair: !pair ? 'none' : rows[0]?.pair_added ? 'added' : 'exists',
        /** the package's observed rules after the change */
        observe: parseTextArray(rows[0]?.observe ?? null),
      };
    },

    /**
     * The package's test-only pair with its signing key, made with `make` the first time. `null`
     * when the package is not allowlisted. Racing first calls keep one pair (unique index). With
     * an auditor, the statement that adds the pair records `allowlist.key.add`.
     */
    async ensureTestPair(
      packageName: string,
      make: () => Promise<TestKeyPair>,
      auditor?: Auditor,
    ): Promise<{ pair: TestKeyPair; created: boolean } | null> {
      const read = async () =>
        rowsOf<PairRow & { signing_key: Uint8Array }>(
          await db.execute(sql`
            select package_name, id, decryption_key, verification_key, signing_key, master_key_id, test_only from android_key_pairs
            where package_name = ${packageName} and test_only and signing_key is not null`),
        )[0];
      const toPair = (r: NonNullable<Awaited<ReturnType<typeof read>>>): TestKeyPair => ({
        id: r.id,
        decryptionKey: open(r, 'decryption_key'),
        verificationKey: open(r, 'verification_key'),
        signingKey: open(r, 'signing_key'),
      });
      const existing = await read();
      if (existing) return { pair: toPair(existing), created: false };
      const fresh = await make();
      const secrets = box();
      const seal = (value: Uint8Array, column: string) =>
        Buffer.from(secrets.seal(value, aadFor(PAIRS, column, [packageName, fresh.id])).ciphertext);
      const inserted = rowsOf<{ id: string; audit: unknown }>(
        await db.execute(sql`
          with ${pairsBefore(packageName)},
          i as (
            insert into android_key_pairs (package_name, id, decryption_key, verification_key, test_only, signing_key, master_key_id)
            select package_name, ${fresh.id}, ${seal(fresh.decryptionKey, 'decryption_key')}, ${seal(fresh.verificationKey, 'verification_key')}, true,
                   ${seal(fresh.signingKey, 'signing_key')}, ${secrets.keyId}
            from android_packages where package_name = ${packageName}
            on conflict do nothing
            returning id
          )${auditCte(
            auditor,
            (actor) => sql`
            select ${actor}, 'allowlist.key.add', ${`android:${packageName}`},
                   jsonb_build_object('keyPairs', pairs.ids, 'testKeyPairs', pairs.test_ids),
                   jsonb_build_object('keyPairs', pairs.ids, 'testKeyPairs', pairs.test_ids || jsonb_build_array(i.id))
            from i, pairs`,
          )}
          select i.id, ${auditColumn(auditor)} as audit from i`),
      );
      if (inserted.length === 1) {
        logAudit(auditor, inserted[0]!.audit);
        return { pair: fresh, created: true };
      }
      const winner = await read();
      return winner ? { pair: toPair(winner), created: false } : null;
    },

    /**
     * Removes a whole package (with its keys), or with `pairId` retires one key pair of it. With an
     * auditor, the same statement records `allowlist.remove` or `allowlist.key.remove`.
     */
    async removeAndroid(packageName: string, pairId?: string, auditor?: Auditor): Promise<boolean> {
      const target = `android:${packageName}`;
      const rows = rowsOf<{ audit: unknown }>(
        await db.execute(
          pairId
            ? sql`
              with ${pairsBefore(packageName)},
              d as (delete from android_key_pairs where package_name = ${packageName} and id = ${pairId} returning id)${auditCte(
                auditor,
                (actor) => sql`
                select ${actor}, 'allowlist.key.remove', ${target},
                       jsonb_build_object('keyPairs', pairs.ids, 'testKeyPairs', pairs.test_ids),
                       jsonb_build_object('keyPairs', pairs.ids - d.id, 'testKeyPairs', pairs.test_ids - d.id)
                from d, pairs`,
              )}
              select ${auditColumn(auditor)} as audit from d`
            : sql`
              with ${pairsBefore(packageName)},
              d as (delete from android_packages where package_name = ${packageName} returning *)${auditCte(
                auditor,
                (actor) => sql`
                select ${actor}, 'allowlist.remove', ${target}, ${androidSummary(sql`d`, sql`pairs.ids`, sql`pairs.test_ids`)}, null::jsonb from d, pairs`,
              )}
              select ${auditColumn(auditor)} as audit from d`,
        ),
      );
      if (rows.length === 1) logAudit(auditor, rows[0]!.audit);
      return rows.length === 1;
    },

    async listAndroid(): Promise<AndroidPackagePolicy[]> {
      const packages = rowsOf<PackageRow>(
        await db.execute(sql`
          select package_name, certificate_digests, min_verdict, allow_unrecognized, max_age_seconds,
                 ${ruleColumnList(ANDROID_RULES)}, service_account, service_account_key_id,
                 observe, max_verifies_per_device, device_window_seconds
          from android_packages order by package_name`),
      );
      const pairs = rowsOf<PairRow>(
        await db.execute(
          sql`select package_name, id, decryption_key, verification_key, master_key_id, test_only from android_key_pairs order by created_at, id`,
        ),
      );
      return packages.map((p) => ({
        packageName: p.package_name,
        keys: pairs
          .filter((k) => k.package_name === p.package_name)
          .map((k) => ({
            id: k.id,
            decryptionKey: open(k, 'decryption_key'),
            verificationKey: open(k, 'verification_key'),
            ...(k.test_only ? { testOnly: true } : {}),
          })),
        certificateDigests: parseDigests(p.certificate_digests),
        minVerdict: p.min_verdict as MinVerdict,
        allowUnrecognized: p.allow_unrecognized,
        maxAgeSeconds: p.max_age_seconds,
        ...(ruleValuesOf(ANDROID_RULES, p) as AndroidRules),
        observe: parseTextArray(p.observe),
        maxVerifiesPerDevice: deviceLimitOf(p),
        serviceAccount:
          p.service_account === null
            ? null
            : openServiceAccount(p.package_name, p.service_account, p.service_account_key_id),
      }));
    },
  };
}

export type AllowlistRepository = ReturnType<typeof createAllowlistRepository>;
