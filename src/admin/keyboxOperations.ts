import { z } from 'zod';
import { createIssuerVelocityRepository } from '../db/issuerVelocity.js';
import { operation } from './operation.js';

/** The leaked-keybox defence's figures for operators (the admin socket or the database only). */
export const KEYBOX_OPERATIONS = {
  /** the issuing certificates nearest their package's --max-keys-per-issuer (live keys) */
  'stats.issuers': operation({
    input: z.strictObject({ at: z.date(), limit: z.number().int().min(1).max(100) }),
    changes: false,
    run: (ctx, { at, limit }) =>
      createIssuerVelocityRepository(ctx.handle.db).nearest({ at, mode: 'live', limit }),
  }),
};
