import { createPublicKey, generateKeyPairSync, hash } from 'node:crypto';
import {
  calculateJwkThumbprint,
  compactVerify,
  createLocalJWKSet,
  decodeProtectedHeader,
  errors,
  type JWK,
} from 'jose';
import { confirmationProblem } from './deviceKeyConfirmation.js';
import { jwsHasHighS } from './ecdsaLowS.js';
import type { DeviceKeyConfirmation, ResultTokenClaims } from './resultTokenClaims.js';
import { kindOf, type PlatformDetails } from './kinds.js';

/** The JWS `typ` of a result token. */
export const RESULT_TOKEN_TYPE = 'attest-result+jwt';
/** Its only algorithm. */
export const RESULT_TOKEN_ALG = 'ES256';
// apart from this module (and jose) for `attest result-keys`, which shows them

/** The JWKS path of the live keys. */
export const LIVE_JWKS_PATH = '/.well-known/jwks.json';
/**
 * The JWKS path of the test keys: the tokens of test-mode API keys (which accept the development
 * CA's minted evidence) are signed by keys published only here, so a verifier of the live JWKS
 * never accepts one.
 */
export const TEST_JWKS_PATH = '/.well-known/jwks-test.json';

/** A public key as the JWKS publishes it. */
export interface ResultJwk {
  kty: 'EC';
  crv: 'P-256';
  x: string;
  y: string;
  kid: string;
  alg: typeof RESULT_TOKEN_ALG;
  use: 'sig';
}

/**
 * The claims for one valid verify. Built from the response's details only: nothing of the API
 * key, the token or any reason can reach a result token.
 * @param input.now - seconds since the epoch (iat)
 */
export function resultClaims(input: {
  issuer: string;
  apiKeyId: string;
  approach: 'session' | 'sessionless';
  nonce: Uint8Array;
  details: PlatformDetails;
  now: number;
  ttlSeconds: number;
  jti: string;
  /** a test-mode API key's verify: the token says so (`test: true`) */
  test?: boolean;
  /** the device key the evidence attested (from deviceKeyConfirmation), for `cnf` */
  confirmation?: DeviceKeyConfirmation;
}): ResultTokenClaims {
  const { service, ...rest } = input.details;
  // the one details object of the response (appleTokenDetails, googleTokenDetails...)
  const details = Object.values(rest)[0] as Record<string, unknown>;
  return {
    iss: input.issuer,
    aud: input.apiKeyId,
    sub: subjectOf(service, details),
    iat: input.now,
    exp: input.now + input.ttlSeconds,
    jti: input.jti,
    service,
    approach: input.approach,
    nonce: hash('sha256', input.nonce, 'base64url'),
    details,
    ...(input.confirmation ? { cnf: input.confirmation } : {}),
    ...(input.test ? { test: true as const } : {}),
  };
}

/**
 * The platform key a token is about: its kind's `subject` field (packageName for Play Integrity,
 * the attested key's id for App Attest and Android key attestation).
 */
function subjectOf(service: string, details: Record<string, unknown>): string {
  const field = kindOf(service)?.subject;
  const value = field === undefined ? undefined : details[field];
  if (typeof value !== 'string') throw new TypeError(`no subject in the ${service} details`);
  return value;
}

/** A new P-256 signing key: its kid (RFC 7638 thumbprint), SPKI and PKCS#8 DER. */
export async function newResultSigningKey(): Promise<{
  id: string;
  publicKey: Uint8Array;
  privateKey: Uint8Array;
}> {
  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const spki = new Uint8Array(publicKey.export({ format: 'der', type: 'spki' }));
  return {
    id: await calculateJwkThumbprint(publicKey.export({ format: 'jwk' }) as JWK, 'sha256'),
    publicKey: spki,
    privateKey: new Uint8Array(privateKey.export({ format: 'der', type: 'pkcs8' })),
  };
}

/** The JWK a key is published as. */
export function publicJwk(id: string, spki: Uint8Array): ResultJwk {
  const jwk = createPublicKey({ key: Buffer.from(spki), format: 'der', type: 'spki' }).export({
    format: 'jwk',
  });
  if (jwk.kty !== 'EC' || jwk.crv !== 'P-256') throw new TypeError('not a P-256 key');
  return {
    kty: 'EC',
    crv: 'P-256',
    x: jwk.x!,
    y: jwk.y!,
    kid: id,
    alg: RESULT_TOKEN_ALG,
    use: 'sig',
  };
}

/** Whether `text` looks like a compact JWS (three base64url parts) rather than an attestation token. */
export function looksLikeJws(text: string): boolean {
  return /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(text.trim());
}

/** One step of checking a result token, as `verify-file` prints it. */
export interface ResultTokenCheck {
  id: 'format' | 'key' | 'signature' | 'claims' | 'issuer' | 'audience' | 'expiry';
  status: 'pass' | 'fail' | 'skip';
  detail: string;
}

export type ResultTokenVerdict = {
  valid: boolean;
  checks: ResultTokenCheck[];
  /** the header and claims as the token states them (also when a check failed) */
  header?: Record<string, unknown>;
  claims?: Record<string, unknown>;
};

/**
 * Checks a result token against a set of public keys, step by step: its form and header, a key
 * with its kid, the signature, the claims, the issuer and audience when given, and its lifetime
 * at `now`. Never throws for a bad token.
 */
export async function checkResultToken(
  token: string,
  options: { keys: readonly JWK[]; now: Date; issuer?: string; audience?: string },
): Promise<ResultTokenVerdict> {
  const checks: ResultTokenCheck[] = [];
  const done = (valid: boolean, extra: Partial<ResultTokenVerdict> = {}): ResultTokenVerdict => {
    const order: ResultTokenCheck['id'][] = [
      'format',
      'key',
      'signature',
      'claims',
      'issuer',
      'audience',
      'expiry',
    ];
    for (const id of order)
      if (!checks.some((c) => c.id === id))
        checks.push({ id, status: 'skip', detail: 'not reached' });
    return { valid, checks, ...extra };
  };
  const text = token.trim();
  let header: Record<string, unknown>;
  let claims: Record<string, unknown>;
  try {
    header = decodeProtectedHeader(text) as Record<string, unknown>;
    claims = JSON.parse(Buffer.from(text.split('.')[1]!, 'base64url').toString('utf8')) as Record<
      string,
      unknown
    >;
    if (typeof claims !== 'object' || claims === null || Array.isArray(claims))
      throw new TypeError('the payload is not a JSON object');
  } catch (err) {
    checks.push({ id: 'format', status: 'fail', detail: `not a JWS: ${(err as Error).message}` });
    return done(false);
  }
  if (header.alg !== RESULT_TOKEN_ALG || header.typ !== RESULT_TOKEN_TYPE) {
    checks.push({
      id: 'format',
      status: 'fail',
      detail: `header alg ${String(header.alg)}, typ ${String(header.typ)}: a result token has alg ${RESULT_TOKEN_ALG}, typ ${RESULT_TOKEN_TYPE}`,
    });
    return done(false, { header, claims });
  }
  checks.push({
    id: 'format',
    status: 'pass',
    detail: `JWS, alg ${RESULT_TOKEN_ALG}, typ ${RESULT_TOKEN_TYPE}`,
  });
  const kid = typeof header.kid === 'string' ? header.kid : undefined;
  if (!kid || !options.keys.some((k) => k.kid === kid)) {
    checks.push({
      id: 'key',
      status: 'fail',
      detail: `no published key has kid ${kid ?? '(none)'} (${options.keys.length} key(s) known)`,
    });
    return done(false, { header, claims });
  }
  checks.push({ id: 'key', status: 'pass', detail: `kid ${kid}` });
  let payload: Record<string, unknown>;
  try {
    // the signature alone: the claims and the lifetime are separate steps, at the caller's instant
    const verified = await compactVerify(text, createLocalJWKSet({ keys: [...options.keys] }), {
      algorithms: [RESULT_TOKEN_ALG],
    });
    payload = JSON.parse(new TextDecoder().decode(verified.payload)) as Record<string, unknown>;
  } catch (err) {
    const what =
      err instanceof errors.JWSSignatureVerificationFailed
        ? 'the signature does not verify with that key'
        : (err as Error).message;
    checks.push({ id: 'signature', status: 'fail', detail: what });
    return done(false, { header, claims });
  }
  if (jwsHasHighS(text)) {
    checks.push({
      id: 'signature',
      status: 'fail',
      detail:
        'the signature verifies but in its high-S form: the deployment only issues low-S (a twin of a genuine token)',
    });
    return done(false, { header, claims });
  }
  checks.push({ id: 'signature', status: 'pass', detail: 'ES256 signature verifies' });
  const problem = claimsProblem(payload);
  if (problem) {
    checks.push({ id: 'claims', status: 'fail', detail: problem });
    return done(false, { header, claims });
  }
  checks.push({
    id: 'claims',
    status: 'pass',
    detail:
      payload.test === true
        ? 'the claims of a test-mode result token (test: true): it proves nothing about a device'
        : 'exactly the claims of a result token',
  });
  if (options.issuer === undefined)
    checks.push({
      id: 'issuer',
      status: 'skip',
      detail: `iss ${String(payload.iss)} (no issuer to compare)`,
    });
  else if (payload.iss !== options.issuer) {
    checks.push({
      id: 'issuer',
      status: 'fail',
      detail: `iss ${String(payload.iss)}, expected ${options.issuer}`,
    });
    return done(false, { header, claims });
  } else checks.push({ id: 'issuer', status: 'pass', detail: `iss ${options.issuer}` });
  if (options.audience === undefined)
    checks.push({
      id: 'audience',
      status: 'skip',
      detail: `aud ${String(payload.aud)} (no audience to compare)`,
    });
  else if (payload.aud !== options.audience) {
    checks.push({
      id: 'audience',
      status: 'fail',
      detail: `aud ${String(payload.aud)}, expected ${options.audience}`,
    });
    return done(false, { header, claims });
  } else checks.push({ id: 'audience', status: 'pass', detail: `aud ${options.audience}` });
  const at = Math.floor(options.now.getTime() / 1000);
  const exp = payload.exp as number;
  const iat = payload.iat as number;
  const expires = new Date(exp * 1000).toISOString();
  if (at >= exp) {
    checks.push({ id: 'expiry', status: 'fail', detail: `expired at ${expires}` });
    return done(false, { header, claims });
  }
  if (at < iat) {
    checks.push({
      id: 'expiry',
      status: 'fail',
      detail: `issued at ${new Date(iat * 1000).toISOString()}, after ${options.now.toISOString()}`,
    });
    return done(false, { header, claims });
  }
  checks.push({ id: 'expiry', status: 'pass', detail: `expires at ${expires} (in ${exp - at} s)` });
  return done(true, { header, claims });
}

/** Every claim a result token carries, no more (the OpenAPI schema lists them from here). */
export const RESULT_TOKEN_CLAIMS: readonly string[] = [
  'iss',
  'aud',
  'sub',
  'iat',
  'exp',
  'jti',
  'service',
  'approach',
  'nonce',
  'details',
];

/**
 * What is wrong with a payload's claims, or undefined. `test`, when present, must be `true`;
 * `cnf`, when present, a confirmation JWK.
 */
export function claimsProblem(payload: Record<string, unknown>): string | undefined {
  const keys = Object.keys(payload).filter((k) => k !== 'test' && k !== 'cnf');
  const cnf = confirmationProblem(payload.cnf);
  if (cnf) return cnf;
  if ('test' in payload && payload.test !== true) return 'test is present but not true';
  const extra = keys.filter((k) => !RESULT_TOKEN_CLAIMS.includes(k));
  if (extra.length) return `claims not in a result token: ${extra.join(', ')}`;
  const missing = RESULT_TOKEN_CLAIMS.filter((k) => !keys.includes(k));
  if (missing.length) return `missing claims: ${missing.join(', ')}`;
  for (const k of ['iss', 'aud', 'sub', 'jti', 'service', 'nonce'])
    if (typeof payload[k] !== 'string') return `${k} is not a string`;
  for (const k of ['iat', 'exp'])
    if (!Number.isInteger(payload[k])) return `${k} is not a whole number of seconds`;
  if (payload.approach !== 'session' && payload.approach !== 'sessionless')
    return 'approach is neither session nor sessionless';
  const d = payload.details;
  if (typeof d !== 'object' || d === null || Array.isArray(d)) return 'details is not an object';
  return undefined;
}
