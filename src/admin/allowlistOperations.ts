import { z } from 'zod';
import { formatCertificateDigest } from '../core/gms/certificateDigest.js';
import {
  ANDROID_DEVICE_LIMIT_FIELD,
  ANDROID_KEY_POLICY_FIELDS,
} from '../core/androidKey/androidKeyPolicyFields.js';
import { APPLE_POLICY_FIELDS } from '../core/apple/applePolicyFields.js';
import { GMS_VERDICT_FIELDS } from '../core/gms/gmsPolicyFields.js';
import { policyInputShape } from '../core/policyFields.js';
import { observableCodes, type ObserveEntry } from '../core/observedRules.js';
import { createAllowlistRepository } from '../db/allowlist.js';
import type { AndroidPolicyInput } from '../db/androidPackageRows.js';
import type { ApplePolicyInput } from '../db/appleAppRows.js';
import { AdminError } from './adminError.js';
import { keyPairId } from './keyPairId.js';
import { auditorOf, bytes, MIN_VERDICT, none, operation, stripUndefined } from './operation.js';

export const APPLE_APP_ID = z.string().regex(/^[A-Z0-9]{10}\.[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/);
export const ANDROID_PACKAGE = z
  .string()
  .regex(/^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)+$/);
const PAIR_ID = z.string().regex(/^[0-9a-f]{16}$/);

/** `--observe` / `--enforce` of an entry kind: only codes observable for it (identity checks never are). */
function observeChange(entry: ObserveEntry) {
  const allowed: readonly string[] = observableCodes(entry);
  const code = z
    .string()
    .refine((c) => allowed.includes(c), `not observable for ${entry}: ${allowed.join(', ')}`);
  const codes = z.array(code).min(1).max(allowed.length);
  return z
    .strictObject({
      observe: codes.optional(),
      enforce: z.union([z.literal('all'), codes]).optional(),
    })
    .optional();
}

/**
 * An Android package's policy: the Play keys' companions (digests, verdict, age, service account)
 * here, and each rule of the gms and android-key tables as the table stores it.
 */
const androidPolicy = z.strictObject({
  certificateDigests: z
    .array(bytes.refine((b) => b.length === 32))
    .max(32)
    .optional(),
  minVerdict: MIN_VERDICT.optional(),
  allowUnrecognized: z.boolean().optional(),
  maxAgeSeconds: z.number().int().min(1).max(86_400).optional(),
  serviceAccount: z
    .strictObject({
      clientEmail: z.string().max(320),
      privateKeyId: z.string().max(200).optional(),
      privateKey: z.string().max(16_384),
    })
    .nullable()
    .optional(),
  ...policyInputShape([
    ...GMS_VERDICT_FIELDS,
    ...ANDROID_KEY_POLICY_FIELDS,
    ANDROID_DEVICE_LIMIT_FIELD,
  ]),
  observeChange: observeChange('android'),
}) as unknown as z.ZodType<AndroidPolicyInput>;

/** An App Attest app's policy: the rules of its table, and the observed-rule change. */
const applePolicy = z.strictObject({
  ...policyInputShape(APPLE_POLICY_FIELDS),
  observeChange: observeChange('apple'),
}) as unknown as z.ZodType<ApplePolicyInput>;

/** The allowlist's operations: add, list, find and remove App Attest apps and Android packages. */
export const ALLOWLIST_OPERATIONS = {
  'allowlist.addApple': operation({
    input: z.strictObject({
      appId: APPLE_APP_ID,
      env: z.enum(['production', 'development', 'any']).optional(),
      policy: applePolicy.optional(),
    }),
    changes: true,
    run: (ctx, { appId, env, policy }) =>
      createAllowlistRepository(ctx.handle.db, null).addApple(
        appId,
        env,
        auditorOf(ctx),
        policy === undefined ? {} : stripUndefined(policy),
      ),
  }),
  'allowlist.addAndroid': operation({
    input: z.strictObject({
      packageName: ANDROID_PACKAGE,
      pair: z
        .strictObject({
          decryptionKey: bytes.refine((b) => b.length === 32),
          verificationKey: bytes,
        })
        .nullable(),
      withoutKeys: z.boolean(),
      policy: androidPolicy,
    }),
    changes: true,
    async run(ctx, { packageName, pair, withoutKeys, policy }) {
      const repo = createAllowlistRepository(ctx.handle.db, await ctx.secrets());
      if (
        !pair &&
        !withoutKeys &&
        policy.serviceAccount == null &&
        policy.keyAttestation !== true &&
        !(await repo.listAndroid()).some((p) => p.packageName === packageName)
      ) {
        throw new AdminError(
          'usage',
          `${packageName} is not on the allowlist: a new package needs --decryption-key and --verification-key, --service-account-file, --key-attestation, or --without-keys`,
        );
      }
      const withId = pair && { id: keyPairId(pair.decryptionKey, pair.verificationKey), ...pair };
      return repo.addAndroid(packageName, withId, policy, auditorOf(ctx));
    },
  }),
  'allowlist.list': operation({
    input: none,
    changes: false,
    async run(ctx) {
      const repo = createAllowlistRepository(ctx.handle.db, await ctx.secrets());
      const [apple, android] = await Promise.all([repo.listApple(), repo.listAndroid()]);
      // fingerprints and the service account's email only: the keys are secrets
      return {
        apple,
        android: android.map((p) => ({
          packageName: p.packageName,
          minVerdict: p.minVerdict,
          allowUnrecognized: p.allowUnrecognized,
          maxAgeSeconds: p.maxAgeSeconds,
          certificateDigests: p.certificateDigests.map(formatCertificateDigest),
          keyPairs: p.keys.filter((k) => !k.testOnly).map((k) => k.id),
          testOnlyKeyPairs: p.keys.filter((k) => k.testOnly).map((k) => k.id),
          requireLicensed: p.requireLicensed ?? false,
          playProtectVerdicts: [...(p.playProtectVerdicts ?? [])],
          denyAppAccessRisk: [...(p.denyAppAccessRisk ?? [])],
          maxDeviceActivity: p.maxDeviceActivity ?? null,
          denyRecallBits: [...(p.denyRecallBits ?? [])],
          minAccountActivity: p.minAccountActivity ?? null,
          denyLocationSpoofing: [...(p.denyLocationSpoofing ?? [])],
          serviceAccount: p.serviceAccount?.clientEmail ?? null,
          keyAttestation: p.keyAttestation ?? false,
          minSecurityLevel: p.minSecurityLevel ?? 'TrustedEnvironment',
          allowUnlocked: p.allowUnlocked ?? false,
          bootKeys: (p.bootKeys ?? []).map((k) => Buffer.from(k).toString('hex')),
          maxPatchAgeMonths: p.maxPatchAgeMonths ?? null,
          observe: [...(p.observe ?? [])],
          maxVerifiesPerDevice: p.maxVerifiesPerDevice ?? null,
          maxKeysPerIssuer: p.maxKeysPerIssuer ?? null,
        })),
      };
    },
  }),
  'allowlist.ids': operation({
    input: none,
    changes: false,
    run: (ctx) => createAllowlistRepository(ctx.handle.db, null).listIds(),
  }),
  'allowlist.find': operation({
    input: z.discriminatedUnion('kind', [
      z.strictObject({ kind: z.literal('apple'), id: z.string().max(300) }),
      z.strictObject({ kind: z.literal('android'), id: z.string().max(300) }),
    ]),
    changes: false,
    async run(ctx, { kind, id }) {
      if (kind === 'apple') {
        const app = (await createAllowlistRepository(ctx.handle.db, null).listApple()).find(
          (a) => a.appId === id,
        );
        return app ? { env: app.env, pairs: [] as string[] } : null;
      }
      // listing a package opens its key pairs, which needs the master key
      const repo = createAllowlistRepository(ctx.handle.db, await ctx.secrets());
      const pkg = (await repo.listAndroid()).find((p) => p.packageName === id);
      return pkg ? { env: null, pairs: pkg.keys.map((k) => k.id) } : null;
    },
  }),
  'allowlist.remove': operation({
    input: z.strictObject({
      kind: z.enum(['apple', 'android']),
      id: z.string().max(300),
      keyId: PAIR_ID.optional(),
    }),
    changes: true,
    async run(ctx, { kind, id, keyId }) {
      const repo = createAllowlistRepository(ctx.handle.db, null);
      const removed =
        kind === 'apple'
          ? await repo.removeApple(id, auditorOf(ctx))
          : await repo.removeAndroid(id, keyId, auditorOf(ctx));
      return { removed };
    },
  }),
} as const;
