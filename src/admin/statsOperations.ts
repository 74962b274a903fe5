import { z } from 'zod';
import { SERVICES } from '../core/services.js';
import { STATS_DIMENSIONS, STATS_MODES } from '../db/statsDimensions.js';
import { createVerificationStatsRepository } from '../db/verificationStats.js';
import { operation, stripUndefined } from './operation.js';

/** `attest stats`: the verification counts every instance added to the database. */
export const STATS_OPERATIONS = {
  'stats.totals': operation({
    input: z.strictObject({
      since: z.date(),
      until: z.date(),
      by: z.enum(STATS_DIMENSIONS),
      app: z.string().min(1).max(255).optional(),
      apiKeyId: z
        .string()
        .regex(/^[0-9a-z]{16}$/)
        .optional(),
      service: z.enum(SERVICES).optional(),
      /** whose verifies: live keys unless asked */
      mode: z.enum(STATS_MODES).optional(),
    }),
    changes: false,
    run: (ctx, query) =>
      createVerificationStatsRepository(ctx.handle.db).totals(stripUndefined(query)),
  }),
  /** each observed rule: verifies since it was observed, how many it would have rejected, the share */
  'stats.rollout': operation({
    input: z.strictObject({
      until: z.date(),
      app: z.string().min(1).max(255).optional(),
      apiKeyId: z
        .string()
        .regex(/^[0-9a-z]{16}$/)
        .optional(),
      service: z.enum(SERVICES).optional(),
      /** whose verifies: live keys unless asked */
      mode: z.enum(STATS_MODES).optional(),
    }),
    changes: false,
    run: (ctx, query) =>
      createVerificationStatsRepository(ctx.handle.db).rollout(stripUndefined(query)),
  }),
};
