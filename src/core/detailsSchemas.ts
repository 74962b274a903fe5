import type { DetailsSchema } from './detailsSchema.js';
import { KINDS } from './kinds.js';

/** The details schemas of every evidence kind, in the kinds' order (the OpenAPI document's). */
export const DETAILS_SCHEMAS: readonly DetailsSchema[] = KINDS.map((k) => k.detailsSchema);
