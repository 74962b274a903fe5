/**
 * Offline verification of result tokens, for the services an RP hands them to. It needs `jose`
 * (an optional peer dependency): it is loaded here, on first use, so the rest of the client never
 * loads it and has no runtime dependency.
 */
import type { JWTVerifyGetKey } from 'jose';
import type { ResultTokenClaims } from '../core/resultTokenClaims.js';
import { AttestError } from './errors.js';
import { BodyTooLargeError, readBoundedBody } from '../readBoundedBody.js';

/** The most of a JWKS answer read (a few keys are a few KB). */
const MAX_JWKS_BYTES = 256 * 1024;

export interface VerifyResultTokenOptions {
  /** the deployment's issuer, exactly as configured (ATTEST_ISSUER) */
  issuer: string;
  /** the API key id the token must be made for */
  audience: string;
  /** where the keys are; default `<issuer>/.well-known/jwks.json` */
  jwksUrl?: string | URL;
  /**
   * Accept test-mode tokens (`test: true`, signed by the keys at `testJwksUrl`). Default false:
   * such a token is refused (problem `test_token`) before any key is fetched, because a test
   * API key accepts evidence minted without a device; only a test environment opts in.
   */
  acceptTestTokens?: boolean;
  /** where the test keys are; default `<issuer>/.well-known/jwks-test.json` */
  testJwksUrl?: string | URL;
  /** a fixed key set instead (no network) */
  jwks?: { keys: readonly Record<string, unknown>[] };
  /** the final nonce the RP used: the token's `nonce` must be its SHA-256 */
  nonce?: Uint8Array;
  /** verify as of this instant; default now */
  currentDate?: Date;
  /** seconds of clock skew tolerated on iat and exp; default 0 */
  clockToleranceSeconds?: number;
  /** injected for tests: fetches the JWKS */
  fetch?: typeof globalThis.fetch;
}

/** Why a result token was refused. */
export type ResultTokenProblem =
  'malformed' | 'signature' | 'expired' | 'claims' | 'nonce' | 'keys_unavailable' | 'test_token';

/** A result token that does not verify; `problem` says which check refused it. */
export class AttestResultTokenError extends AttestError {
  override readonly name = 'AttestResultTokenError';
  readonly code = 'ERR_ATTEST_RESULT_TOKEN' as const;
  /** the JWKS URL the keys were fetched from (also in the message, and `url`); absent with a fixed `jwks` */
  readonly jwksUrl: string | undefined;
  constructor(
    readonly problem: ResultTokenProblem,
    message: string,
    options?: ErrorOptions & { jwksUrl?: string | undefined },
  ) {
    super(
      `result token: ${message}${options?.jwksUrl ? ` (keys: ${options.jwksUrl})` : ''}`,
      undefined,
      options?.cause === undefined ? undefined : { cause: options.cause },
    );
    this.jwksUrl = options?.jwksUrl;
    this.url = options?.jwksUrl;
  }
}

const CLAIMS = [
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

/** One remote key set per JWKS URL (and fetch function): jose caches the keys and refetches an unknown kid. */
const remoteSets = new Map<string, JWTVerifyGetKey>();
const remoteSetsByFetch = new WeakMap<typeof globalThis.fetch, Map<string, JWTVerifyGetKey>>();

/**
 * Verifies a result token offline: ES256 signature against the deployment's published keys
 * (fetched once and cached for 5 minutes; a token signed by a newer key makes it refetch, at
 * most every 5 s), `typ`, issuer, audience, lifetime and the claim set; with `nonce`, also the
 * binding to the RP's own request. Resolves with the claims, or rejects with an
 * `AttestResultTokenError`.
 */
export async function verifyResultToken(
  token: string,
  options: VerifyResultTokenOptions,
): Promise<ResultTokenClaims> {
  if (typeof token !== 'string' || token.length === 0)
    throw new TypeError('token must be a non-empty string');
  if (typeof options?.issuer !== 'string' || typeof options.audience !== 'string')
    throw new TypeError('issuer and audience are required strings');
  const jose = await import('jose');
  // which key set may sign it: the test keys only for a token that says test (and only when
  // asked); a token that says nothing is checked against the live keys, which never sign a
  // test-mode token, so a lie either way fails the signature
  let test = false;
  try {
    test = jose.decodeJwt(token).test !== undefined;
  } catch {
    // malformed: jwtVerify below says so
  }
  const url = options.jwks
    ? undefined
    : new URL(
        test
          ? (options.testJwksUrl ?? `${options.issuer}/.well-known/jwks-test.json`)
          : (options.jwksUrl ?? `${options.issuer}/.well-known/jwks.json`),
      );
  // the URL too, as every other problem ends: it says which deployment's test keys it named
  if (test && options.acceptTestTokens !== true)
    throw new AttestResultTokenError(
      'test_token',
      'a test-mode token (test: true) proves nothing about a device; only a test environment accepts it, with acceptTestTokens: true',
      { jwksUrl: url?.href },
    );
  const keys = url
    ? remoteSet(jose, url, options.fetch)
    : jose.createLocalJWKSet({ keys: [...options.jwks!.keys] as never });
  const jwksUrl = url?.href;
  // (r, n - s) verifies as well as (r, s): the deployment signs the low-S form only, so the
  // high-S twin of a genuine token is refused and each token has one string
  if (hasHighS(jose, token))
    throw new AttestResultTokenError(
      'signature',
      'a high-S signature: not the canonical form the deployment signs',
      { jwksUrl },
    );
  let payload: Record<string, unknown>;
  try {
    ({ payload } = await jose.jwtVerify(token, keys, {
      issuer: options.issuer,
      audience: options.audience,
      algorithms: ['ES256'],
      typ: 'attest-result+jwt',
      requiredClaims: ['iat', 'exp', 'jti', 'sub'],
      ...(options.currentDate ? { currentDate: options.currentDate } : {}),
      clockTolerance: options.clockToleranceSeconds ?? 0,
    }));
  } catch (err) {
    throw new AttestResultTokenError(problemOf(jose, err), (err as Error).message, {
      cause: err,
      jwksUrl,
    });
  }
  if (test && payload.test !== true)
    throw new AttestResultTokenError('claims', 'test is present but not true', { jwksUrl });
  // cnf is optional: only results about a device key carry one
  const names = Object.keys(payload).filter((n) => !(test && n === 'test') && n !== 'cnf');
  const cnf = payload.cnf as { jwk?: { kty?: unknown } } | undefined;
  if (
    cnf !== undefined &&
    (typeof cnf !== 'object' ||
      cnf === null ||
      typeof cnf.jwk !== 'object' ||
      cnf.jwk === null ||
      (cnf.jwk.kty !== 'EC' && cnf.jwk.kty !== 'RSA'))
  )
    throw new AttestResultTokenError('claims', 'cnf is not a confirmation JWK', { jwksUrl });
  const odd = [
    ...names.filter((n) => !CLAIMS.includes(n)),
    ...CLAIMS.filter((n) => !names.includes(n)),
  ];
  if (odd.length || typeof payload.details !== 'object' || payload.details === null)
    throw new AttestResultTokenError(
      'claims',
      `not the claims of a result token (${odd.join(', ') || 'details'})`,
      { jwksUrl },
    );
  if (options.nonce) {
    const digest = new Uint8Array(
      await globalThis.crypto.subtle.digest('SHA-256', options.nonce as Uint8Array<ArrayBuffer>),
    );
    if (jose.base64url.encode(digest) !== payload.nonce)
      throw new AttestResultTokenError('nonce', 'made for another nonce', { jwksUrl });
  }
  return payload as unknown as ResultTokenClaims;
}

/** The order of P-256 halved: a low-S signature's s is at most this. */
const P256_HALF_N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n >> 1n;

/**
 * Whether an ES256 compact JWS has its s above n/2 (the same rule as the service's
 * core/ecdsaLowS.ts, which this package does not ship). Anything else is left to jwtVerify.
 */
function hasHighS(jose: typeof import('jose'), token: string): boolean {
  const parts = token.split('.');
  if (parts.length !== 3) return false;
  let signature: Uint8Array;
  try {
    signature = jose.base64url.decode(parts[2]!);
  } catch {
    return false;
  }
  if (signature.length !== 64) return false;
  let s = 0n;
  for (const byte of signature.subarray(32)) s = (s << 8n) | BigInt(byte);
  return s > P256_HALF_N;
}

function remoteSet(
  jose: typeof import('jose'),
  url: URL,
  fetchWith: typeof globalThis.fetch | undefined,
) {
  let sets = remoteSets;
  if (fetchWith) {
    sets = remoteSetsByFetch.get(fetchWith) ?? new Map();
    remoteSetsByFetch.set(fetchWith, sets);
  }
  let set = sets.get(url.href);
  if (!set) {
    const fetchOf = fetchWith ?? globalThis.fetch;
    set = jose.createRemoteJWKSet(url, {
      cacheMaxAge: 300_000,
      cooldownDuration: 5_000,
      // jose reads the whole answer (response.json()): the key set is read here first, cut at
      // MAX_JWKS_BYTES as it streams, so a hostile or broken JWKS URL costs bounded memory
      [jose.customFetch]: async (input: string | URL, init: RequestInit) => {
        const res = await fetchOf(input, init);
        if (res.status < 200 || res.status > 599) return res; // a manual redirect: no body
        const body = await readBoundedBody(res, MAX_JWKS_BYTES);
        return new Response(body as Uint8Array<ArrayBuffer>, {
          status: res.status,
          statusText: res.statusText,
          headers: res.headers,
        });
      },
    });
    sets.set(url.href, set);
  }
  return set;
}

function problemOf(jose: typeof import('jose'), err: unknown): ResultTokenProblem {
  const e = jose.errors;
  if (err instanceof BodyTooLargeError) return 'keys_unavailable';
  if (err instanceof e.JWTExpired) return 'expired';
  if (err instanceof e.JWTClaimValidationFailed) return 'claims';
  if (err instanceof e.JWSSignatureVerificationFailed || err instanceof e.JWKSNoMatchingKey)
    return 'signature';
  if (err instanceof e.JWKSTimeout || err instanceof e.JWKSInvalid) return 'keys_unavailable';
  if (
    err instanceof e.JOSEAlgNotAllowed ||
    err instanceof e.JWSInvalid ||
    err instanceof e.JWTInvalid
  )
    return 'malformed';
  // a network failure fetching the keys
  if (err instanceof TypeError || (err as { code?: string }).code === 'ERR_JOSE_GENERIC')
    return 'keys_unavailable';
  return 'malformed';
}
