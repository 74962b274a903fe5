import { z } from 'zod';
import { createIssuerBlockRepository } from '../db/issuerBlocks.js';
import { createIssuerVelocityRepository } from '../db/issuerVelocity.js';
import { STATS_MODES } from '../db/statsDimensions.js';
import { auditorOf, none, operation } from './operation.js';

/** A normalized serial (normalizeSerial): the CLI checks the operator's text first. */
const SERIAL = z.string().regex(/^[0-9a-f]{1,64}$/);

/** The leaked-keybox defence's figures for operators (the admin socket or the database only). */
export const KEYBOX_OPERATIONS = {
  /** the issuing certificates nearest their package's --max-keys-per-issuer (live keys unless asked) */
  'stats.issuers': operation({
    input: z.strictObject({
      at: z.date(),
      limit: z.number().int().min(1).max(100),
      mode: z.enum(STATS_MODES).optional(),
    }),
    changes: false,
    run: (ctx, { at, limit, mode }) =>
      createIssuerVelocityRepository(ctx.handle.db).nearest({ at, mode: mode ?? 'live', limit }),
  }),
  /** refuse registrations under this issuing certificate (android_chain_revoked); audited */
  'androidIssuers.block': operation({
    input: z.strictObject({ serial: SERIAL }),
    // every instance re-reads the blocklist within its propagation time
    changes: true,
    run: async (ctx, { serial }) => ({
      changed: await createIssuerBlockRepository(ctx.handle.db).block(serial, auditorOf(ctx)),
    }),
  }),
  'androidIssuers.unblock': operation({
    input: z.strictObject({ serial: SERIAL }),
    changes: true,
    run: async (ctx, { serial }) => ({
      changed: await createIssuerBlockRepository(ctx.handle.db).unblock(serial, auditorOf(ctx)),
    }),
  }),
  'androidIssuers.list': operation({
    input: none,
    changes: false,
    run: (ctx) => createIssuerBlockRepository(ctx.handle.db).list(),
  }),
};
