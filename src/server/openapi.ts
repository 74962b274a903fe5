import { DETAILS_SCHEMAS } from '../core/detailsSchemas.js';
import { RESULT_TOKEN_CLAIMS } from '../core/resultToken.js';
/** OpenAPI 3.1 description of every operation and every response (served at /openapi.json). */
const errorBody = {
  type: 'object',
  required: ['statusCode', 'errorMessage'],
  properties: {
    statusCode: {
      type: 'integer',
      description: '268505088 internal error, 268505089 invalid request',
    },
    errorMessage: { type: 'string' },
  },
} as const;

const base64 = { type: 'string', contentEncoding: 'base64' } as const;
/** Every evidence kind's details schemas (each kind declares its own, beside its verifier). */
/** `AppleTokenDetails, GoogleTokenDetails, ... or ...`: every kind's details, in the kinds' order */
const detailsNames = (): string =>
  DETAILS_SCHEMAS.map((d) => d.main)
    .join(', ')
    .replace(/, (\w+)$/, ' or $1');

const detailsComponents = (): Record<string, object> =>
  Object.assign({}, ...DETAILS_SCHEMAS.map((d) => d.components));
/** The verify answer's details fields, one per kind, each referring to its kind's schema. */
const detailsFields = (): Record<string, object> =>
  Object.fromEntries(
    DETAILS_SCHEMAS.map((d) => [d.responseField, { $ref: `#/components/schemas/${d.main}` }]),
  );
/** Why a verify was rejected: only for API keys made with --rejection-details. */
const REJECTION_COMPONENTS = {
  Rejection: {
    type: 'object',
    description:
      'Only for API keys made with --rejection-details, only with isValid false: the reason code (docs/checks.md), and for a Play Integrity cause the user can fix on the device the Play dialog the app can show',
    required: ['reason'],
    properties: {
      reason: { type: 'string' },
      remediation: { $ref: '#/components/schemas/Remediation' },
    },
  },
  Remediation: {
    type: 'object',
    description:
      "A Play Integrity remediation dialog: its name (GET_LICENSED, CLOSE_UNKNOWN_ACCESS_RISK, CLOSE_ALL_ACCESS_RISK, GET_INTEGRITY, GET_STRONG_INTEGRITY) and the type code to pass to showDialog on the token's response",
    required: ['dialog', 'typeCode'],
    properties: { dialog: { type: 'string' }, typeCode: { type: 'integer' } },
  },
};

const err = (description: string) => ({
  description,
  content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
});

export const OPENAPI_DOCUMENT = {
  openapi: '3.1.0',
  info: {
    title: 'attest',
    version: '1',
    description:
      'Verifies Apple App Attest, Google Play Integrity and Android key attestation tokens. Grant the protected operation only on HTTP 200 with isValid true; a rejection never says why (the reason is in the server log).',
  },
  servers: [{ url: '/' }],
  security: [{ apiKey: [] }],
  components: {
    securitySchemes: { apiKey: { type: 'apiKey', in: 'header', name: 'X-Api-Key' } },
    schemas: {
      Error: errorBody,
      ...detailsComponents(),
      ...REJECTION_COMPONENTS,
      ResultTokenDetails: {
        type: 'object',
        required: [],
        properties: {},
        additionalProperties: true,
        description: `the details object of the verify response that made the token (${detailsNames()})`,
      },
      ResultTokenConfirmation: {
        type: 'object',
        description:
          "RFC 7800 confirmation: only on results about a device key (App Attest, android-key), the device's own public key",
        required: ['jwk'],
        properties: {
          jwk: {
            type: 'object',
            additionalProperties: true,
            description:
              'the public JWK (kty, crv, x, y for EC; kty, n, e for RSA): the App Attest key whose point hashes to the key id, or the attested Android leaf key',
          },
        },
      },
      ResultTokenClaims: {
        type: 'object',
        description: 'the claims of a result token, as the token states them',
        required: [...RESULT_TOKEN_CLAIMS],
        properties: {
          iss: { type: 'string', description: 'the deployment (ATTEST_ISSUER)' },
          aud: { type: 'string', description: 'the id of the API key whose verify made the token' },
          sub: {
            type: 'string',
            description:
              'keyIdentifier (App Attest, Android key attestation) or packageName (Play Integrity)',
          },
          iat: { type: 'integer' },
          exp: { type: 'integer' },
          jti: { type: 'string' },
          service: { type: 'string' },
          approach: { enum: ['session', 'sessionless'] },
          nonce: { type: 'string', description: 'base64url of SHA-256 of the final nonce' },
          details: { $ref: '#/components/schemas/ResultTokenDetails' },
          cnf: { $ref: '#/components/schemas/ResultTokenConfirmation' },
          test: {
            type: 'boolean',
            description: 'only on the tokens of test-mode API keys, always true',
          },
        },
      },
    },
  },
  paths: {
    '/api/v1/attestation/init': {
      post: {
        operationId: 'init',
        summary: 'Create a session and its server nonce (session approach)',
        responses: {
          '200': {
            description: 'Session created',
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  required: ['sessionReference', 'serverNonce', 'expiresAtUtc', 'statusCode'],
                  properties: {
                    sessionReference: { type: 'string' },
                    serverNonce: { ...base64, description: '32 bytes' },
                    expiresAtUtc: { type: 'string', format: 'date-time' },
                    statusCode: { const: 0 },
                  },
                },
              },
            },
          },
          '401': { description: 'X-Api-Key missing or empty' },
          '403': { description: 'Key invalid, unknown, revoked or expired' },
          '500': err('Unexpected failure (statusCode 268505088)'),
          '503': err(
            'Too many new API keys being checked at once; or no database takes the request now (unreachable, silent past ATTEST_DB_WAIT_TIMEOUT_MS, a read-only standby, a failover under way): no verdict, retry after Retry-After (a session or counter whose statement was cut may be spent) (statusCode 268505088)',
          ),
        },
      },
    },
    '/api/v1/attestation/verify': {
      post: {
        operationId: 'verify',
        summary: 'Verify an attestation token',
        requestBody: {
          required: true,
          content: {
            'application/json': {
              schema: {
                type: 'object',
                required: ['attestationToken'],
                properties: {
                  attestationToken: {
                    ...base64,
                    description: 'the token CBOR, base64 or base64url',
                  },
                  sessionReference: {
                    type: 'string',
                    description: 'session approach; exclusive with expectedNonce',
                  },
                  deviceNonce: { ...base64, description: 'session approach only, 1 to 128 bytes' },
                  expectedNonce: {
                    ...base64,
                    description: 'sessionless approach: the final nonce, 16 to 512 bytes',
                  },
                },
              },
            },
          },
        },
        responses: {
          '200': {
            description:
              'Verified: isValid true with the platform details, or rejected: isValid false',
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  required: ['isValid', 'statusCode'],
                  properties: {
                    isValid: { type: 'boolean' },
                    statusCode: { const: 0 },
                    ...detailsFields(),
                    rejection: { $ref: '#/components/schemas/Rejection' },
                    resultToken: {
                      type: 'string',
                      description:
                        'Only for API keys with result tokens on, only with isValid true: an ES256 JWT (typ attest-result+jwt) of the result, verifiable offline against /.well-known/jwks.json (the token of a test-mode API key carries test: true and verifies against /.well-known/jwks-test.json only)',
                    },
                  },
                },
              },
            },
          },
          '400': err('Malformed request (statusCode 268505089)'),
          '401': { description: 'X-Api-Key missing or empty' },
          '403': { description: 'Key invalid, unknown, revoked or expired' },
          '413': err('Body over 64 KiB (statusCode 268505089)'),
          '500': err(
            'Unexpected failure, including Google giving no verdict for a standard Play Integrity request (unreachable, slow, 429, 5xx) (statusCode 268505088)',
          ),
          '503': err(
            'Too many new API keys being checked at once, or too many standard Play Integrity requests waiting on Google; or no database takes the request now (unreachable, silent past ATTEST_DB_WAIT_TIMEOUT_MS, a read-only standby, a failover under way): no verdict, retry after Retry-After (a session or counter whose statement was cut may be spent) (statusCode 268505088)',
          ),
        },
      },
    },
    '/api/v1/android/device-recall': {
      post: {
        operationId: 'writeDeviceRecall',
        summary: "Mark the device of a verified Play Integrity token with Google's device recall",
        description:
          "Checks that attestationToken is a Play Integrity token of an allowlisted package with a Google service account, then calls Google's deviceRecall:write for that package with the integrity token inside and the bits given (a bit not named keeps its value). written false: nothing was written (not such a token, or Google refused or did not answer in time); the reason is in the server log, never the token.",
        requestBody: {
          required: true,
          content: {
            'application/json': {
              schema: {
                type: 'object',
                required: ['attestationToken', 'bits'],
                properties: {
                  attestationToken: {
                    ...base64,
                    description: 'the token the RP verified (CBOR, base64 or base64url)',
                  },
                  bits: {
                    type: 'object',
                    minProperties: 1,
                    additionalProperties: false,
                    properties: {
                      bitFirst: { type: 'boolean' },
                      bitSecond: { type: 'boolean' },
                      bitThird: { type: 'boolean' },
                    },
                  },
                },
              },
            },
          },
        },
        responses: {
          '200': {
            description: 'Google wrote the bits (written true), or nothing was written',
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  required: ['written'],
                  properties: { written: { type: 'boolean' } },
                },
              },
            },
          },
          '400': err('Malformed request (statusCode 268505089)'),
          '401': { description: 'X-Api-Key missing or empty' },
          '403': { description: 'Key invalid, unknown, revoked or expired' },
          '413': err('Body over 64 KiB (statusCode 268505089)'),
          '500': err('Unexpected failure (statusCode 268505088)'),
          '503': err(
            'Too many requests waiting on Google, or too many new API keys being checked at once; or no database takes the request now (unreachable, silent past ATTEST_DB_WAIT_TIMEOUT_MS, a read-only standby, a failover under way): no verdict, retry after Retry-After (a session or counter whose statement was cut may be spent) (statusCode 268505088)',
          ),
        },
      },
    },
    '/api/v1/results/consume': {
      post: {
        operationId: 'consumeResultToken',
        summary: 'Consume a result token once (replay protection)',
        description:
          "Checks a result token of this deployment (signature with its own keys, iss, exp; no aud check) and records its jti once for all instances. A service that acts on a result (a payment, a ledger entry) accepts it only when valid is true and alreadyConsumed is false. A live API key consumes live tokens only, a test-mode key test tokens only, a key scoped to apps only tokens of those apps (anything else is valid false and stays unused). A jti is kept until the token's exp plus one hour. 404 when the deployment has no issuer (ATTEST_ISSUER unset).",
        requestBody: {
          required: true,
          content: {
            'application/json': {
              schema: {
                type: 'object',
                required: ['resultToken'],
                properties: {
                  resultToken: {
                    type: 'string',
                    maxLength: 8192,
                    description: 'the resultToken of a verify answer, as given',
                  },
                },
              },
            },
          },
        },
        responses: {
          '200': {
            description:
              "valid true with alreadyConsumed (false only the first time, on any instance) and the claims; valid false when the token does not verify (tampered, another signer, expired, the other mode, an app outside a scoped key's apps): the reason is in the server log only",
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  required: ['valid'],
                  properties: {
                    valid: { type: 'boolean' },
                    alreadyConsumed: { type: 'boolean', description: 'only with valid true' },
                    claims: { $ref: '#/components/schemas/ResultTokenClaims' },
                  },
                },
              },
            },
          },
          '400': err(
            'Malformed request: not JSON, resultToken missing, not a string, empty or over 8192 characters, or a body over 16 KiB (statusCode 268505089)',
          ),
          '401': { description: 'X-Api-Key missing or empty' },
          '403': { description: 'Key invalid, unknown, revoked or expired' },
          '404': err('The deployment signs no result tokens (statusCode 268505089)'),
          '500': err(
            'An unexpected failure, or the database failing the statement (a deadlock, a full disk): whether the jti was recorded is unknown, so a later consume may answer alreadyConsumed true; act on neither (statusCode 268505088)',
          ),
          '503': err(
            'Too many new API keys being checked at once; or no database takes the request now (unreachable, silent past ATTEST_DB_WAIT_TIMEOUT_MS, a read-only standby, a failover under way): whether the jti was recorded is unknown (a cut reply), so a later consume may answer alreadyConsumed true; retry after Retry-After (statusCode 268505088)',
          ),
        },
      },
    },
  },
} as const;
