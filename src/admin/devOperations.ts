import { X509Certificate } from 'node:crypto';
import { z } from 'zod';
import { createReceiptVerifier, readReceiptFacts } from '../core/apple/verifyReceipt.js';
import { encodeBase64 } from '../core/base64.js';
import { createDevCa } from '../core/dev/devCa.js';
import { mintReceipt } from '../core/dev/devReceipt.js';
import { encodeGmsToken } from '../core/gms/gmsToken.js';
import { MAX_VERDICT_VALUES, VERDICT_VALUE } from '../core/gms/accountLocationPolicy.js';
import {
  createTestPlayKeys,
  DEVICE_VERDICTS,
  sealIntegrityToken,
  verdictPayload,
} from '../core/dev/playIntegrityMint.js';
import { createAllowlistRepository } from '../db/allowlist.js';
import { createRevocationRepository } from '../db/androidRevocations.js';
import { createAppleKeyRepository } from '../db/appleKeys.js';
import { createDevCaRepository } from '../db/devCa.js';
import { createDevReceiptStore } from '../db/devReceipts.js';
import { AdminError } from './adminError.js';
import { ANDROID_PACKAGE } from './allowlistOperations.js';
import { auditorOf, bytes, MIN_VERDICT, none, operation } from './operation.js';

/** A verdict value as `dev mint gms` sets it (any name Google could send), and a list of them. */
const VALUE = z.string().regex(VERDICT_VALUE);
const VALUES = z.array(VALUE).max(MAX_VERDICT_VALUES);
const MINTED_VERDICTS = z.strictObject({
  appLicensingVerdict: VALUE.optional(),
  playProtectVerdict: VALUE.optional(),
  appsDetected: VALUES.optional(),
  deviceActivityLevel: VALUE.optional(),
  accountActivityLevel: VALUE.optional(),
  locationSpoofingRiskVerdict: VALUES.optional(),
  legacyDeviceRecognitionVerdict: VALUES.optional(),
});

/**
 * The development CA and test tokens and receipts (`attest dev`), and verify-file's read-only
 * snapshot.
 */
export const DEV_OPERATIONS = {
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
  'dev.refreshReceipt': operation({
    input: z.strictObject({
      keyId: bytes.refine((b) => b.length === 32),
      riskMetric: z.number().int().min(0).max(999_999_999),
    }),
    // the verifier sees the new risk metric at once: its one-statement assertion path requires
    // the stored risk metric to be the one it holds, so no cache needs dropping
    changes: false,
    async run(ctx, { keyId, riskMetric }) {
      const db = ctx.handle.db;
      const name = encodeBase64(keyId);
      const keys = createAppleKeyRepository(db);
      // registrations are kept per API key mode: development receipts are for the test one
      const key = (await keys.find(keyId, 'test')) ?? (await keys.find(keyId, 'live'));
      if (!key) throw new AdminError('negative', `no App Attest key ${name} is registered`);
      const liveKey = () =>
        new AdminError(
          'usage',
          `key ${name} was registered with a live API key: development receipts are for keys of test API keys only`,
        );
      if (key.mode !== 'test') throw liveKey();
      const ca = await createDevCaRepository(db, await ctx.secrets()).get();
      if (!ca)
        throw new AdminError(
          'runtime',
          'this deployment has no development CA yet: run "attest dev init" first',
        );
      // a refreshed receipt names the attested certificate of the key's first receipt
      const stored = (await keys.receipt(keyId))?.receipt;
      const previous = stored ? readReceiptFacts(stored) : null;
      if (!previous)
        throw new AdminError(
          'usage',
          `key ${name} has no receipt to refresh: register it with "attest dev mint apple --receipt"`,
        );
      const now = new Date();
      const expect = {
        type: 'RECEIPT',
        appId: key.appId,
        attestedCertificate: previous.attestedCertificate,
      } as const;
      const receipt = await mintReceipt(ca, {
        ...expect,
        environment: key.environment,
        now,
        riskMetric,
      });
      // stored as the refresher stores Apple's: checked, with the facts the check read
      const verdict = await createReceiptVerifier([new X509Certificate(ca.rootCert)]).verify(
        receipt,
        expect,
        now,
      );
      if (!verdict.valid)
        throw new Error(`the development receipt does not verify: ${verdict.problem}`);
      const outcome = await createDevReceiptStore(db).store(keyId, receipt, verdict.facts, now);
      if (outcome === 'unknown')
        throw new AdminError('negative', `no App Attest key ${name} is registered`);
      if (outcome === 'live') throw liveKey();
      return {
        riskMetric,
        creationTime: verdict.facts.creationTime,
        expirationTime: verdict.facts.expirationTime,
        bytes: receipt.length,
      };
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
      recallBits: z
        .array(z.enum(['first', 'second', 'third']))
        .max(3)
        .optional(),
      verdicts: MINTED_VERDICTS.optional(),
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
        ...(input.recallBits ? { recallBits: input.recallBits } : {}),
        ...(input.verdicts ? { verdicts: input.verdicts } : {}),
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
} as const;
