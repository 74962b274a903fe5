import { z } from 'zod';
import { CAPTURE_ID, createCaptureRepository } from '../db/captures.js';
import { auditorOf, operation, stripUndefined } from './operation.js';

/** The most captures one `captures list` answer holds (it crosses the admin socket as one answer). */
export const CAPTURE_PAGE = 1000;

/**
 * Tokens kept for replay (ATTEST_CAPTURE): listed without their tokens, read one at a time with
 * the audit event `capture.read`. Operators only: the admin socket or the database, never the
 * RP API (no route reads token_captures).
 */
export const CAPTURE_OPERATIONS = {
  'captures.list': operation({
    input: z.strictObject({
      mode: z.enum(['live', 'test']),
      reason: z
        .string()
        .max(100)
        .regex(/^[a-z][a-z0-9_]*$/)
        .optional(),
      app: z.string().min(1).max(256).optional(),
      since: z.date().optional(),
      limit: z.number().int().min(1).max(CAPTURE_PAGE),
    }),
    changes: false,
    run: (ctx, filter) => createCaptureRepository(ctx.handle.db).list(stripUndefined(filter)),
  }),
  'captures.read': operation({
    input: z.strictObject({
      id: z.string().regex(CAPTURE_ID, 'a capture id is 16 hex digits'),
      purpose: z.enum(['get', 'verify-file']),
    }),
    // nothing a cache holds changes; the read itself is audited
    changes: false,
    async run(ctx, { id, purpose }) {
      const auditor = auditorOf(ctx);
      return createCaptureRepository(ctx.handle.db).read(
        id,
        await ctx.secrets({ establish: false }),
        auditor,
        purpose,
      );
    },
  }),
} as const;
