import { androidKeyDetailsSchema } from './android/androidKeyDetailsSchema.js';
import { appleDetailsSchema } from './apple/appleDetailsSchema.js';
import type { DetailsSchema } from './detailsSchema.js';
import { gmsDetailsSchema } from './google/gmsDetailsSchema.js';
import { gmsPcDetailsSchema } from './googlePc/pcDetailsSchema.js';

/** The details schemas of every evidence kind, in the order the OpenAPI document lists them. */
export const DETAILS_SCHEMAS: readonly DetailsSchema[] = [
  gmsDetailsSchema,
  appleDetailsSchema,
  androidKeyDetailsSchema,
  gmsPcDetailsSchema,
];
