import { z } from 'zod';
import { createDevCa } from '../core/dev/devCa.js';
import { encodeGmsToken } from '../core/dev/encodeToken.js';
import {
  createTestPlayKeys,
  DEVICE_VERDICTS,
  sealIntegrityToken,
  verdictPayload,
} from '../core/dev/playIntegrityMint.js';
import { createAllowlistRepository } from '../db/allowlist.js';
import { createRevocationRepository } from '../db/androidRevocations.js';
import { createDevCaRepository } from '../db/devCa.js';
import { AdminError } from './adminError.js';
import { ANDROID_PACKAGE } from './allowlistOperations.js';
import { auditorOf, bytes, MIN_VERDICT, none, operation } from './operation.js';

/** The development CA and test tokens (`attest dev`), and verify-file's read-only snapshot. */
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
} as const;
