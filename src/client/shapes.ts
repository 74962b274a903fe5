/**
 * The response shapes the client accepts, as data: the validator walks them, and a test holds
 * them against the service's /openapi.json (required fields, types, enums, constants), so the
 * client and the contract cannot drift apart silently. Each kind's details shapes are generated
 * from its schema (src/client/detailsShapes.ts).
 */
import { DETAILS_PROPERTIES } from './detailsShapes.js';

export type FieldType =
  | { type: 'string' }
  | { type: 'integer'; minimum?: number; nullable?: true }
  | { type: 'boolean' }
  | { type: 'string[]' }
  | { type: 'integer[]' }
  /** a JSON object whose keys are data, not fields (checked as an object only) */
  | { type: 'record' }
  | { const: number }
  | { enum: readonly string[] }
  | { object: Shape };

export interface Shape {
  readonly name: string;
  readonly required: readonly string[];
  readonly properties: Readonly<Record<string, FieldType>>;
}

export const INIT_RESPONSE = {
  name: 'init 200',
  required: ['sessionReference', 'serverNonce', 'expiresAtUtc', 'statusCode'],
  properties: {
    sessionReference: { type: 'string' },
    serverNonce: { type: 'string' },
    expiresAtUtc: { type: 'string' },
    statusCode: { const: 0 },
  },
} as const satisfies Shape;

export const REMEDIATION = {
  name: 'Remediation',
  required: ['dialog', 'typeCode'],
  properties: { dialog: { type: 'string' }, typeCode: { type: 'integer' } },
} as const satisfies Shape;

export const REJECTION = {
  name: 'Rejection',
  required: ['reason'],
  properties: { reason: { type: 'string' }, remediation: { object: REMEDIATION } },
} as const satisfies Shape;

export const VERIFY_RESPONSE = {
  name: 'verify 200',
  required: ['isValid', 'statusCode'],
  properties: {
    isValid: { type: 'boolean' },
    statusCode: { const: 0 },
    // only for API keys with result tokens on
    resultToken: { type: 'string' },
    // only for API keys made with --rejection-details, on isValid false
    rejection: { object: REJECTION },
    // each kind's details field (src/client/detailsShapes.ts)
    ...DETAILS_PROPERTIES,
  },
} as const satisfies Shape;

/** The claims a consume returns (any details object: the one of the verify that made the token). */
export const RESULT_TOKEN_CLAIMS = {
  name: 'ResultTokenClaims',
  required: ['iss', 'aud', 'sub', 'iat', 'exp', 'jti', 'service', 'approach', 'nonce', 'details'],
  properties: {
    iss: { type: 'string' },
    aud: { type: 'string' },
    sub: { type: 'string' },
    iat: { type: 'integer' },
    exp: { type: 'integer' },
    jti: { type: 'string' },
    service: { type: 'string' },
    approach: { enum: ['session', 'sessionless'] },
    nonce: { type: 'string' },
    details: { object: { name: 'ResultTokenDetails', required: [], properties: {} } },
    // RFC 7800, only on results about a device key (App Attest, android-key)
    cnf: {
      object: {
        name: 'ResultTokenConfirmation',
        required: ['jwk'],
        properties: { jwk: { type: 'record' } },
      },
    },
    // only on the tokens of test-mode API keys
    test: { type: 'boolean' },
  },
} as const satisfies Shape;

export const CONSUME_RESPONSE = {
  name: 'consume 200',
  required: ['valid'],
  properties: {
    valid: { type: 'boolean' },
    // only with valid true
    alreadyConsumed: { type: 'boolean' },
    claims: { object: RESULT_TOKEN_CLAIMS },
  },
} as const satisfies Shape;

export const DEVICE_RECALL_RESPONSE = {
  name: 'device-recall 200',
  required: ['written'],
  properties: { written: { type: 'boolean' } },
} as const satisfies Shape;

export const ERROR_BODY = {
  name: 'Error',
  required: ['statusCode', 'errorMessage'],
  properties: { statusCode: { type: 'integer' }, errorMessage: { type: 'string' } },
} as const satisfies Shape;

/** The first way `value` differs from `shape` (`undefined` when it fits). Unknown fields are allowed. */
export function validate(shape: Shape, value: unknown, at = ''): string | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return `${at || shape.name} is not a JSON object`;
  const record = value as Record<string, unknown>;
  for (const field of shape.required) if (!(field in record)) return `${at}${field} is missing`;
  for (const [field, type] of Object.entries(shape.properties)) {
    if (!(field in record)) continue;
    const problem = check(type, record[field], `${at}${field}`);
    if (problem) return problem;
  }
  return undefined;
}

function check(type: FieldType, value: unknown, at: string): string | undefined {
  if ('const' in type) return value === type.const ? undefined : `${at} is not ${type.const}`;
  if ('enum' in type)
    return typeof value === 'string' && type.enum.includes(value)
      ? undefined
      : `${at} is not one of ${type.enum.join(', ')}`;
  if ('object' in type) return validate(type.object, value, `${at}.`);
  switch (type.type) {
    case 'string':
      return typeof value === 'string' ? undefined : `${at} is not a string`;
    case 'boolean':
      return typeof value === 'boolean' ? undefined : `${at} is not a boolean`;
    case 'string[]':
      return Array.isArray(value) && value.every((v) => typeof v === 'string')
        ? undefined
        : `${at} is not a list of strings`;
    case 'integer[]':
      return Array.isArray(value) && value.every((v) => Number.isSafeInteger(v))
        ? undefined
        : `${at} is not a list of integers`;
    case 'record':
      return typeof value === 'object' && value !== null && !Array.isArray(value)
        ? undefined
        : `${at} is not a JSON object`;
    case 'integer':
      if (value === null && type.nullable) return undefined;
      if (!Number.isSafeInteger(value)) return `${at} is not an integer`;
      return type.minimum !== undefined && (value as number) < type.minimum
        ? `${at} is below ${type.minimum}`
        : undefined;
  }
}
