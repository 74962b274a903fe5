import { z } from 'zod';
import { DEVICE_KEY_SERVICES } from '../core/services.js';
import { createDeviceVelocityRepository } from '../db/deviceVelocity.js';
import { bytes, operation } from './operation.js';

const KEY_ID = bytes.refine((b) => b.length === 32, 'a key id is 32 bytes');

/** Registered keys as devices: what `attest devices show` and verify-file read of their counts. */
export const DEVICE_OPERATIONS = {
  'devices.show': operation({
    // the caller's clock: the window shown is the one holding `at`
    input: z.strictObject({ keyId: KEY_ID, at: z.date() }),
    changes: false,
    run: (ctx, { keyId, at }) => createDeviceVelocityRepository(ctx.handle.db).show(keyId, at),
  }),
  'devices.peek': operation({
    input: z.strictObject({
      keyId: KEY_ID,
      service: z.enum(DEVICE_KEY_SERVICES),
      windowStart: z.date(),
      periodSeconds: z.number().int().positive(),
      at: z.date(),
    }),
    changes: false,
    run: (ctx, verify) => createDeviceVelocityRepository(ctx.handle.db).peek(verify),
  }),
} as const;
