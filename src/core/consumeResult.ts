import { errors, jwtVerify, type JWTVerifyGetKey } from 'jose';
import { claimsProblem, RESULT_TOKEN_ALG, RESULT_TOKEN_TYPE } from './resultToken.js';
import type { ResultTokenClaims } from './resultTokenClaims.js';
import { jwsHasHighS } from './ecdsaLowS.js';
import { keyAllowsApp, type AppScope } from './appScope.js';
import type { KeyMode } from './ports.js';

/**
 * Why a consume answered `valid: false`: logged on the request's line, never returned (an RP
 * learns nothing about why a forged or borrowed token failed).
 */
export const CONSUME_REJECT_REASONS = [
  /** not a compact JWS of a result token (form, alg, typ) */
  'result_token_malformed',
  /** no key of the consuming key's mode has its kid: another signer, or a key long retired */
  'result_token_key_unknown',
  /** a test token consumed with a live key, or the reverse */
  'result_token_wrong_mode',
  'result_token_signature_invalid',
  /** signed by the deployment but not exactly the claims of a result token */
  'result_token_claims_invalid',
  'result_token_issuer_mismatch',
  /** past `exp` (its jti may be pruned already: it can never be consumed again) */
  'result_token_expired',
  /** a key scoped to apps (`keys create --apps`) and a token of another app */
  'result_token_app_not_in_key_scope',
] as const;
export type ConsumeRejectReason = (typeof CONSUME_REJECT_REASONS)[number];

export type ConsumeRejection = { ok: false; reason: ConsumeRejectReason; detail: string };

/**
 * Checks a result token the deployment signed itself: ES256 with one of `keys` (the published
 * keys of one mode), `typ`, the exact claims, `iss`, and `exp` at `now`. No audience: any API key
 * of the deployment may consume any of its tokens (mayConsume decides). Never throws for a bad
 * token; a fault (a key set that cannot be read) throws.
 */
export async function checkOwnResultToken(
  token: string,
  options: { keys: JWTVerifyGetKey; issuer: string; now: Date },
): Promise<{ ok: true; claims: ResultTokenClaims } | ConsumeRejection> {
  let payload: Record<string, unknown>;
  try {
    ({ payload } = await jwtVerify(token, options.keys, {
      algorithms: [RESULT_TOKEN_ALG],
      typ: RESULT_TOKEN_TYPE,
      issuer: options.issuer,
      currentDate: options.now,
      // the signer writes whole seconds at its own clock: no tolerance beyond what exp allows
      clockTolerance: 0,
    }));
  } catch (err) {
    const rejection = rejectionOf(err);
    if (rejection) return rejection;
    throw err;
  }
  // the twin (r, n - s) of a genuine signature verifies too: only the low-S form is the token
  if (jwsHasHighS(token))
    return reject('result_token_signature_invalid', 'a high-S signature: not the canonical form');
  const problem = claimsProblem(payload);
  if (problem) return reject('result_token_claims_invalid', problem);
  return { ok: true, claims: payload as unknown as ResultTokenClaims };
}

function rejectionOf(err: unknown): ConsumeRejection | undefined {
  if (err instanceof errors.JWKSNoMatchingKey)
    return reject('result_token_key_unknown', 'no published key of this mode has its kid');
  if (err instanceof errors.JWSSignatureVerificationFailed)
    return reject('result_token_signature_invalid', 'the signature does not verify');
  if (err instanceof errors.JWTExpired)
    return reject('result_token_expired', `expired at ${expiry(err.payload.exp)}`);
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.claim === 'iss') return reject('result_token_issuer_mismatch', err.message);
    if (err.claim === 'typ') return reject('result_token_malformed', err.message);
    return reject('result_token_claims_invalid', err.message);
  }
  if (
    err instanceof errors.JWSInvalid ||
    err instanceof errors.JWTInvalid ||
    err instanceof errors.JOSEAlgNotAllowed ||
    err instanceof errors.JOSENotSupported ||
    err instanceof errors.JWKSMultipleMatchingKeys
  )
    return reject('result_token_malformed', err.message);
  return undefined;
}

const expiry = (exp: unknown) =>
  typeof exp === 'number' ? new Date(exp * 1000).toISOString() : String(exp);

const reject = (reason: ConsumeRejectReason, detail: string): ConsumeRejection => ({
  ok: false,
  reason,
  detail: detail.slice(0, 200),
});

/** The authenticated API key that consumes a token. */
export interface ConsumingKey {
  id: string;
  mode: KeyMode;
  /** the key's scope (`keys create --apps`); null or absent: every app */
  apps?: AppScope | undefined;
}

/**
 * Whether `key` may consume a verified token with these claims: every authorization rule of a
 * consume is here, checked before the token's jti is recorded (so a key that may not consume a
 * token cannot use it up either). A test-mode key consumes only test tokens (`test: true`), a
 * live key only live ones (the token's keys already differ by mode, this says so in the claims);
 * a key scoped to apps consumes only tokens about one of its apps.
 */
export function mayConsume(
  key: ConsumingKey,
  claims: ResultTokenClaims,
): { ok: true } | ConsumeRejection {
  const testToken = claims.test === true;
  if (testToken !== (key.mode === 'test'))
    return reject(
      'result_token_wrong_mode',
      testToken ? 'a test token consumed with a live key' : 'a live token consumed with a test key',
    );
  if (key.apps) {
    const app = appOf(claims);
    if (app === undefined || !keyAllowsApp(key.apps, app))
      return reject(
        'result_token_app_not_in_key_scope',
        `${app === undefined ? 'a token naming no app' : `app "${app}"`} is not among this API key's apps (${key.apps.length} scoped)`,
      );
  }
  return { ok: true };
}

/**
 * The app a token is about, as the verify's details name it (what a scope lists): the App Attest
 * app ID, or the Android package of Play Integrity and key attestation.
 */
function appOf(claims: ResultTokenClaims): string | undefined {
  const { appId, packageName } = claims.details;
  const app = claims.service === 'apple' ? appId : packageName;
  return typeof app === 'string' ? app : undefined;
}
