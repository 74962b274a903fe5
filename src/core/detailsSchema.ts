/**
 * One evidence kind's part of the verify answer, as the OpenAPI document describes it: the answer's
 * field for the kind's details and the JSON Schemas it refers to. Each kind declares its own beside
 * its verifier; src/core/detailsSchemas.ts lists them.
 */
export interface DetailsSchema {
  /** the verify answer's field that holds the kind's details: `appleTokenDetails` */
  responseField: string;
  /** the component that field refers to */
  main: string;
  /** that component and every component it refers to, by name */
  components: Record<string, object>;
}

/** A base64 text value, as JSON Schema says it. */
export const BASE64_STRING = { type: 'string', contentEncoding: 'base64' } as const;

/** A list of labels, as JSON Schema says it. */
export const STRING_LIST = { type: 'array', items: { type: 'string' } } as const;

/** Milliseconds since the epoch, as JSON Schema says it. */
export const EPOCH_MILLIS = { type: 'integer', format: 'int64' } as const;
