import { z } from 'zod';
import { isApiKeyCheck, isApiKeyHash, isApiKeyName } from '../core/apiKeys.js';
import { PRINTABLE_NAME_RULE } from '../core/printableName.js';
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
import { parseRevocationDocument } from '../core/androidKey/revocationList.js';
import { AUDIT_PAGE, createAuditRepository } from '../db/audit.js';
import { migrationStatus } from '../db/migrate.js';
import { sealedUnderKeyId } from '../db/secrets.js';
import { createReceiptRefreshQueue } from '../db/receiptRefreshQueue.js';
import { createSessionRepository } from '../db/sessions.js';
import { createResultKeyRepository, type ResultKeyRecord } from '../db/resultKeys.js';
import { newResultSigningKey } from '../core/resultToken.js';
import { ROTATION_DELAY_SECONDS } from '../core/resultKeyTiming.js';
import { AdminError } from './adminError.js';
import { checkCredentialUpstreams } from './upstreamChecks.js';
import { ALLOWLIST_OPERATIONS, ANDROID_PACKAGE, APPLE_APP_ID } from './allowlistOperations.js';
import { MAX_SCOPE_APPS } from '../core/appScope.js';
import { DEV_OPERATIONS } from './devOperations.js';
import { STATS_OPERATIONS } from './statsOperations.js';
import { KEYBOX_OPERATIONS } from './keyboxOperations.js';
import { DEVICE_OPERATIONS } from './deviceOperations.js';
import { CAPTURE_OPERATIONS } from './captureOperations.js';
import {
  auditorOf,
  bytes,
  none,
  operation,
  stripUndefined,
  type Operation,
  type OperationContext,
} from './operation.js';

/** A result signing key without its sealed private half: what may leave the database's owner. */
function publicRecord({
  sealed: _sealed,
  ...rest
}: ResultKeyRecord): Omit<ResultKeyRecord, 'sealed'> {
  return rest;
}

const KEY_ID = z.string().regex(/^[0-9a-z]{16}$/);
/**
 * A key's scope: App Attest app IDs and Android packages (by the allowlist's own rules; they need
 * not be allowlisted yet), at least one. null: every allowlisted app.
 */
const KEY_APPS = z
  .array(z.union([APPLE_APP_ID, ANDROID_PACKAGE]).refine((id) => id.length <= 256, 'too long'))
  .min(1)
  .max(MAX_SCOPE_APPS)
  .nullable();

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
      rejectionDetails: z.boolean().optional(),
      apps: KEY_APPS.optional(),
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
  'keys.setRejectionDetails': operation({
    input: z.strictObject({ id: KEY_ID, on: z.boolean() }),
    changes: true,
    async run(ctx, { id, on }) {
      return createApiKeyRepository(ctx.handle.db).setRejectionDetails(id, on, auditorOf(ctx));
    },
  }),
  'keys.setApps': operation({
    input: z.strictObject({ id: KEY_ID, apps: KEY_APPS }),
    changes: true,
    async run(ctx, { id, apps }) {
      return createApiKeyRepository(ctx.handle.db).setApps(id, apps, auditorOf(ctx));
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
  'audit.chain': operation({
    input: z.strictObject({
      afterSeq: z.number().int().nonnegative(),
      limit: z.number().int().min(1).max(AUDIT_PAGE),
      sinceSeconds: z.number().int().positive().optional(),
    }),
    changes: false,
    run: (ctx, filter) => createAuditRepository(ctx.handle.db).chain(stripUndefined(filter)),
  }),
  'audit.head': operation({
    input: none,
    changes: false,
    run: (ctx) => createAuditRepository(ctx.handle.db).head(),
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
  'androidKeys.find': operation({
    input: z.strictObject({ keyId: bytes.refine((b) => b.length <= 64) }),
    changes: false,
    run: (ctx, { keyId }) => createAndroidKeyRepository(ctx.handle.db).find(keyId),
  }),
  // verify-file's read-only replay check (what the server would record)
  'androidKeys.assertionAcceptedAt': operation({
    input: z.strictObject({
      digest: bytes.refine((b) => b.length === 32),
      mode: z.enum(['live', 'test']),
    }),
    changes: false,
    run: (ctx, { digest, mode }) =>
      createAndroidKeyRepository(ctx.handle.db).assertionAcceptedAt(digest, mode),
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
  ...ALLOWLIST_OPERATIONS,
  ...DEV_OPERATIONS,
  ...STATS_OPERATIONS,
  ...KEYBOX_OPERATIONS,
  ...DEVICE_OPERATIONS,
  ...CAPTURE_OPERATIONS,
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
