import { createHash } from 'node:crypto';
import { z } from 'zod';
import { isApiKeyCheck, isApiKeyHash, isApiKeyName } from '../core/apiKeys.js';
import { PRINTABLE_NAME_RULE } from '../core/printableName.js';
import { formatCertificateDigest } from '../core/google/certificateDigest.js';
import { createDevCa } from '../core/dev/devCa.js';
import { encodeGmsToken } from '../core/dev/encodeToken.js';
import {
  createTestPlayKeys,
  DEVICE_VERDICTS,
  sealIntegrityToken,
  verdictPayload,
} from '../core/dev/playIntegrityMint.js';
import { isMinVerdict } from '../core/google/deviceVerdict.js';
import { isDeviceActivityLevel } from '../core/google/verdictPolicy.js';
import type { DeviceActivityLevel, MinVerdict } from '../core/types.js';
import { createAllowlistRepository } from '../db/allowlist.js';
import { createApiKeyRepository } from '../db/apiKeys.js';
import { createAppleKeyRepository } from '../db/appleKeys.js';
import {
  APPLE_KEY_ID,
  APPLE_TEAM_ID,
  createAppleCredentialRepository,
  parseDeviceCheckKey,
} from '../db/appleCredentials.js';
import { createAndroidKeyRepository } from '../db/androidKeys.js';
import { createRevocationRepository } from '../db/androidRevocations.js';
import { parseRevocationDocument } from '../core/android/revocationList.js';
import { createAuditRepository, type Auditor } from '../db/audit.js';
import type { DatabaseHandle } from '../db/client.js';
import { createDevCaRepository } from '../db/devCa.js';
import { migrationStatus } from '../db/migrate.js';
import { sealedUnderKeyId } from '../db/secrets.js';
import type { SecretBox } from '../db/secretBox.js';
import { createReceiptRefreshQueue } from '../db/receiptRefreshQueue.js';
import { createSessionRepository } from '../db/sessions.js';
import { createResultKeyRepository, type ResultKeyRecord } from '../db/resultKeys.js';
import { newResultSigningKey, ROTATION_DELAY_SECONDS } from '../core/resultToken.js';
import { AdminError } from './adminError.js';
import { checkCredentialUpstreams, type UpstreamEndpoints } from './upstreamChecks.js';

/**
 * Where an operation runs: the database handle of the process that owns the database (the
 * running `attest serve`, or the CLI that opened it itself), the master key, and who acts.
 */
export interface OperationContext {
  handle: DatabaseHandle;
  /** the master key's box, checked against the database; `establish: false` records nothing */
  secrets(options?: { establish?: boolean }): Promise<SecretBox>;
  /** who makes the changes; required by the operations that change something */
  auditor?: Auditor;
  /** this process's upstream URLs (its configuration), for status.checkUpstreams */
  upstreams?: UpstreamEndpoints;
}

/** One administrative step on the database: its typed input and the function that runs it. */
export interface Operation<S extends z.ZodType, R> {
  input: S;
  /** true: the running server reloads its caches (API keys, allowlist, development root) after it */
  changes: boolean;
  run(ctx: OperationContext, input: z.output<S>): Promise<R>;
}

function operation<S extends z.ZodType, R>(def: Operation<S, R>): Operation<S, R> {
  return def;
}

/** A result signing key without its sealed private half: what may leave the database's owner. */
function publicRecord({
  sealed: _sealed,
  ...rest
}: ResultKeyRecord): Omit<ResultKeyRecord, 'sealed'> {
  return rest;
}

/** zod's optional keys may hold `undefined`; the repositories take absent keys (exactOptionalPropertyTypes). */
function stripUndefined<T extends object>(value: T): { [K in keyof T]: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as never;
}

function auditorOf(ctx: OperationContext): Auditor {
  if (!ctx.auditor) throw new AdminError('usage', 'this change needs an actor for the audit trail');
  return ctx.auditor;
}

const bytes = z.custom<Uint8Array>((v) => v instanceof Uint8Array, 'expected bytes');
const MIN_VERDICT = z.custom<MinVerdict>(isMinVerdict, 'expected a device verdict');
const KEY_ID = z.string().regex(/^[0-9a-z]{16}$/);
const APPLE_APP_ID = z.string().regex(/^[A-Z0-9]{10}\.[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/);
const ANDROID_PACKAGE = z.string().regex(/^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)+$/);
const PAIR_ID = z.string().regex(/^[0-9a-f]{16}$/);
const none = z.strictObject({});

/** A short public fingerprint of a Play Integrity key pair: never the key material itself. */
export function keyPairId(decryptionKey: Uint8Array, verificationKey: Uint8Array): string {
  return createHash('sha256')
    .update(decryptionKey)
    .update(verificationKey)
    .digest('hex')
    .slice(0, 16);
}

const androidPolicy = z.strictObject({
  certificateDigests: z
    .array(bytes.refine((b) => b.length === 32))
    .max(32)
    .optional(),
  minVerdict: MIN_VERDICT.optional(),
  allowUnrecognized: z.boolean().optional(),
  maxAgeSeconds: z.number().int().min(1).max(86_400).optional(),
  requireLicensed: z.boolean().optional(),
  playProtectVerdicts: z.array(z.string().max(64)).max(16).optional(),
  denyAppAccessRisk: z.array(z.string().max(64)).max(16).optional(),
  maxDeviceActivity: z
    .custom<DeviceActivityLevel>(isDeviceActivityLevel, 'expected LEVEL_1 to LEVEL_4')
    .nullable()
    .optional(),
  serviceAccount: z
    .strictObject({
      clientEmail: z.string().max(320),
      privateKeyId: z.string().max(200).optional(),
      privateKey: z.string().max(16_384),
    })
    .nullable()
    .optional(),
  keyAttestation: z.boolean().optional(),
  minSecurityLevel: z.enum(['TrustedEnvironment', 'StrongBox']).optional(),
  allowUnlocked: z.boolean().optional(),
  bootKeys: z
    .array(bytes.refine((b) => b.length === 32))
    .max(32)
    .optional(),
  maxPatchAgeMonths: z.number().int().min(1).max(240).nullable().optional(),
});

/**
 * Every administrative operation, by name. The CLI runs them on the database it opened, or sends
 * them to the running server, which runs these same functions on its own handle: only the
 * transport differs. Inputs are checked here (the server also gets them from a socket).
 */
export const OPERATIONS = {
  'keys.create': operation({
    input: z.strictObject({
      id: KEY_ID,
      // the CLI's own rules: the server gets these from a socket
      name: z
        .string()
        .refine(isApiKeyName, `name ${PRINTABLE_NAME_RULE}, without surrounding spaces`),
      // the CLI hashes the key it made: the key itself never leaves the CLI
      hash: z
        .string()
        .max(300)
        .refine(isApiKeyHash, 'hash is not an argon2id hash of an API key as attest makes it'),
      precheck: z
        .string()
        .max(100)
        .refine(isApiKeyCheck, 'precheck is not an API key pre-check as attest makes it'),
      expiresInSeconds: z.number().int().positive().nullable(),
      mode: z.enum(['live', 'test']),
      resultTokens: z.boolean(),
    }),
    changes: true,
    async run(ctx, input) {
      const row = await createApiKeyRepository(ctx.handle.db).insert(input, auditorOf(ctx));
      const { hash: _hash, ...shown } = row;
      return shown;
    },
  }),
  'keys.list': operation({
    input: none,
    changes: false,
    async run(ctx) {
      const rows = await createApiKeyRepository(ctx.handle.db).list();
      return rows.map(({ hash: _hash, ...shown }) => shown);
    },
  }),
  'keys.find': operation({
    input: z.strictObject({ id: KEY_ID }),
    changes: false,
    async run(ctx, { id }) {
      const row = await createApiKeyRepository(ctx.handle.db).find(id);
      if (!row) return null;
      // neither the hash nor the pre-check leaves the database
      const { hash: _hash, precheck: _precheck, ...shown } = row;
      return shown;
    },
  }),
  'keys.revoke': operation({
    input: z.strictObject({ id: KEY_ID }),
    changes: true,
    async run(ctx, { id }) {
      return { revoked: await createApiKeyRepository(ctx.handle.db).revoke(id, auditorOf(ctx)) };
    },
  }),
  'keys.setResultTokens': operation({
    input: z.strictObject({ id: KEY_ID, on: z.boolean() }),
    changes: true,
    async run(ctx, { id, on }) {
      return createApiKeyRepository(ctx.handle.db).setResultTokens(id, on, auditorOf(ctx));
    },
  }),
  'resultKeys.rotate': operation({
    // test: the keys of test-mode API keys' tokens (published at /.well-known/jwks-test.json)
    input: z.strictObject({ mode: z.enum(['live', 'test']).optional() }),
    changes: true,
    async run(ctx, { mode }) {
      // made where it is stored: the private key never crosses the admin socket
      const key = await newResultSigningKey();
      try {
        const record = await createResultKeyRepository(ctx.handle.db, await ctx.secrets()).rotate(
          key,
          ROTATION_DELAY_SECONDS,
          auditorOf(ctx),
          mode ?? 'live',
        );
        return publicRecord(record);
      } finally {
        key.privateKey.fill(0);
      }
    },
  }),
  'resultKeys.list': operation({
    input: z.strictObject({
      publishedWithinSeconds: z.number().int().positive().optional(),
    }),
    changes: false,
    async run(ctx, { publishedWithinSeconds }) {
      return (await createResultKeyRepository(ctx.handle.db).list(publishedWithinSeconds)).map(
        publicRecord,
      );
    },
  }),
  'apple.credentials.add': operation({
    input: z.strictObject({
      teamId: z.string().regex(APPLE_TEAM_ID),
      keyId: z.string().regex(APPLE_KEY_ID),
      // the .p8 file's PEM: checked by the CLI, parsed again here
      privateKeyPem: z.string().max(16_384),
    }),
    changes: true,
    async run(ctx, { teamId, keyId, privateKeyPem }) {
      let key;
      try {
        key = parseDeviceCheckKey(privateKeyPem);
      } catch (err) {
        throw new AdminError('usage', (err as Error).message);
      }
      return createAppleCredentialRepository(ctx.handle.db, await ctx.secrets()).add(
        teamId,
        keyId,
        key,
        auditorOf(ctx),
      );
    },
  }),
  'apple.credentials.list': operation({
    input: none,
    changes: false,
    async run(ctx) {
      return createAppleCredentialRepository(ctx.handle.db, await ctx.secrets()).list();
    },
  }),
  'apple.credentials.remove': operation({
    input: z.strictObject({ teamId: z.string().regex(APPLE_TEAM_ID) }),
    changes: true,
    async run(ctx, { teamId }) {
      return {
        removed: await createAppleCredentialRepository(ctx.handle.db, null).remove(
          teamId,
          auditorOf(ctx),
        ),
      };
    },
  }),
  'apple.receipts.show': operation({
    input: z.strictObject({ keyId: bytes.refine((b) => b.length === 32) }),
    changes: false,
    run: (ctx, { keyId }) => createAppleKeyRepository(ctx.handle.db).receipt(keyId),
  }),
  'apple.receipts.summary': operation({
    input: z.strictObject({ at: z.date() }),
    changes: false,
    run: (ctx, { at }) => createReceiptRefreshQueue(ctx.handle.db).summary(at),
  }),
  'audit.list': operation({
    input: z.strictObject({
      sinceSeconds: z.number().int().positive().optional(),
      action: z
        .string()
        .max(100)
        .regex(/^[a-z][a-z0-9_-]*(\.[a-z0-9_-]+)*$/)
        .optional(),
    }),
    changes: false,
    run: (ctx, filter) => createAuditRepository(ctx.handle.db).list(filter),
  }),
  'db.status': operation({
    input: none,
    changes: false,
    run: (ctx) => migrationStatus(ctx.handle.db),
  }),
  'db.masterKeyId': operation({
    input: none,
    changes: false,
    run: (ctx) => sealedUnderKeyId(ctx.handle.db),
  }),
  'status.checkUpstreams': operation({
    // each outbound call's bound; the CLI sends 10 s
    input: z.strictObject({ timeoutMs: z.number().int().min(50).max(10_000) }),
    changes: false,
    async run(ctx, { timeoutMs }) {
      if (!ctx.upstreams)
        throw new AdminError('runtime', 'this process has no upstream configuration to check');
      // the keys are opened here and used here: only each check's outcome leaves
      return checkCredentialUpstreams({
        db: ctx.handle.db,
        box: await ctx.secrets({ establish: false }),
        endpoints: ctx.upstreams,
        timeoutMs,
      });
    },
  }),
  'db.prune': operation({
    input: z.strictObject({ olderThanSeconds: z.number().int().positive() }),
    changes: false,
    async run(ctx, { olderThanSeconds }) {
      return { deleted: await createSessionRepository(ctx.handle.db).prune(olderThanSeconds) };
    },
  }),
  'allowlist.addApple': operation({
    input: z.strictObject({
      appId: APPLE_APP_ID,
      env: z.enum(['production', 'development', 'any']).optional(),
      policy: z
        .strictObject({
          requireReceipt: z.boolean().optional(),
          maxRiskMetric: z.number().int().min(0).nullable().optional(),
          validationCategories: z.array(z.string().max(32)).max(16).optional(),
          minBundleVersion: z.string().max(64).nullable().optional(),
          allowMissingValidationCategory: z.boolean().optional(),
        })
        .optional(),
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
          serviceAccount: p.serviceAccount?.clientEmail ?? null,
          keyAttestation: p.keyAttestation ?? false,
          minSecurityLevel: p.minSecurityLevel ?? 'TrustedEnvironment',
          allowUnlocked: p.allowUnlocked ?? false,
          bootKeys: (p.bootKeys ?? []).map((k) => Buffer.from(k).toString('hex')),
          maxPatchAgeMonths: p.maxPatchAgeMonths ?? null,
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
  'dev.init': operation({
    input: z.strictObject({ rotate: z.boolean() }),
    changes: true,
    async run(ctx, { rotate }) {
      const fresh = await createDevCa(new Date());
      const { ca, stored } = await createDevCaRepository(ctx.handle.db, await ctx.secrets()).put(
        fresh,
        { replace: rotate },
        auditorOf(ctx),
      );
      return { stored, rootCert: ca.rootCert, createdAt: ca.createdAt };
    },
  }),
  'dev.ca': operation({
    input: none,
    changes: false,
    async run(ctx) {
      return createDevCaRepository(ctx.handle.db, await ctx.secrets()).get();
    },
  }),
  'dev.mintGms': operation({
    input: z.strictObject({
      packageName: ANDROID_PACKAGE,
      nonce: bytes.refine((b) => b.length <= 1024),
      issuedAt: z.date(),
      stale: z.boolean(),
      minVerdict: MIN_VERDICT.optional(),
      recognition: z.enum(['PLAY_RECOGNIZED', 'UNRECOGNIZED_VERSION', 'UNEVALUATED']),
      certificateDigest: bytes.refine((b) => b.length === 32).optional(),
      wrongNonce: z.boolean(),
      wrongPackage: z.boolean(),
    }),
    // a package's first mint adds its test-only pair, which test keys must find at once
    changes: true,
    async run(ctx, input) {
      const repo = createAllowlistRepository(ctx.handle.db, await ctx.secrets());
      const policy = (await repo.listAndroid()).find((p) => p.packageName === input.packageName);
      if (!policy)
        throw new AdminError(
          'usage',
          `${input.packageName} is not on the allowlist: run "attest allowlist add android ${input.packageName} --without-keys" (or with its Play keys) first`,
        );
      const ensured = await repo.ensureTestPair(
        input.packageName,
        async () => createTestPlayKeys(),
        auditorOf(ctx),
      );
      if (!ensured)
        throw new AdminError(
          'runtime',
          `${input.packageName} was removed from the allowlist meanwhile`,
        );
      const issuedAt = input.stale
        ? new Date(Date.now() - (policy.maxAgeSeconds + 60) * 1000)
        : input.issuedAt;
      const level = input.minVerdict ?? policy.minVerdict;
      const payload = verdictPayload({
        packageName: input.packageName,
        nonce: input.nonce,
        issuedAt,
        deviceVerdicts: DEVICE_VERDICTS[level],
        recognition: input.recognition,
        certificateDigests: input.certificateDigest
          ? [input.certificateDigest]
          : policy.certificateDigests.slice(0, 1),
        ...(input.wrongNonce ? { wrongNonce: true } : {}),
        ...(input.wrongPackage ? { wrongPackage: true } : {}),
      });
      const integrityToken = await sealIntegrityToken(ensured.pair, payload);
      return {
        token: encodeGmsToken({
          nonce: input.nonce,
          packageName: input.packageName,
          integrityToken,
        }),
        created: ensured.created ? ensured.pair.id : null,
      };
    },
  }),
  'verifyFile.snapshot': operation({
    input: none,
    changes: false,
    async run(ctx) {
      // verify-file's whole allowlist, keys included: it verifies in the CLI's own process
      const repo = createAllowlistRepository(
        ctx.handle.db,
        await ctx.secrets({ establish: false }),
      );
      const [apple, android, devRoot] = await Promise.all([
        repo.listApple(),
        repo.listAndroid(),
        createDevCaRepository(ctx.handle.db).root(),
      ]);
      return { apple, android, devRoot };
    },
  }),
  'verifyFile.revocations': operation({
    input: none,
    changes: false,
    // the stored status list as Google's JSON entries (null: none stored yet)
    run: (ctx) => createRevocationRepository(ctx.handle.db).storedEntries(),
  }),
  'androidKeys.find': operation({
    input: z.strictObject({ keyId: bytes.refine((b) => b.length <= 64) }),
    changes: false,
    run: (ctx, { keyId }) => createAndroidKeyRepository(ctx.handle.db).find(keyId),
  }),
  'android.revocations.update': operation({
    input: z.strictObject({
      // Google's document, checked again here (the server gets it from a socket)
      document: z.unknown(),
      source: z.string().min(1).max(1100),
      takenAt: z.date(),
    }),
    // every instance re-reads the list (the 0009 trigger announces it too)
    changes: true,
    async run(ctx, { document, source, takenAt }) {
      let entries;
      try {
        ({ entries } = parseRevocationDocument(document));
      } catch (err) {
        throw new AdminError(
          'usage',
          `not Google's attestation status list: ${(err as Error).message}`,
        );
      }
      const stored = await createRevocationRepository(ctx.handle.db).replace(
        entries,
        source,
        takenAt,
        auditorOf(ctx),
      );
      return { entries: entries.size, stored };
    },
  }),
  'android.revocations.show': operation({
    input: none,
    changes: false,
    run: (ctx) => createRevocationRepository(ctx.handle.db).info(),
  }),
  'appleKeys.find': operation({
    input: z.strictObject({ keyId: bytes.refine((b) => b.length <= 64) }),
    changes: false,
    run: (ctx, { keyId }) => createAppleKeyRepository(ctx.handle.db).find(keyId),
  }),
} as const;

export type OperationName = keyof typeof OPERATIONS;
export type InputOf<N extends OperationName> = z.input<(typeof OPERATIONS)[N]['input']>;
export type ResultOf<N extends OperationName> = Awaited<ReturnType<(typeof OPERATIONS)[N]['run']>>;

/** Whether `name` is an operation (a name from a socket is any string). */
export function isOperationName(name: unknown): name is OperationName {
  return typeof name === 'string' && Object.prototype.hasOwnProperty.call(OPERATIONS, name);
}

/**
 * Runs one operation: checks its input, runs it. A bad input is an AdminError('usage') naming
 * the first problem; anything the operation throws passes through.
 */
export async function runOperation<N extends OperationName>(
  name: N,
  input: unknown,
  ctx: OperationContext,
): Promise<ResultOf<N>> {
  const op = OPERATIONS[name] as unknown as Operation<z.ZodType, ResultOf<N>>;
  const parsed = op.input.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = issue.path.length ? `${issue.path.join('.')}: ` : '';
    throw new AdminError('usage', `bad input to ${name}: ${where}${issue.message}`);
  }
  return op.run(ctx, parsed.data);
}
