/**
 * Google's Play Integrity server API for standard requests: an OAuth 2.0 access token from the
 * package's service account (JWT bearer grant, RFC 7523), then `v1/{packageName}:decodeIntegrityToken`,
 * and Play device recall writes (`v1/{packageName}/deviceRecall:write`).
 * A token Google refuses is a value (`{ ok: false }`); anything that leaves no verdict (no answer
 * in time, 429, 5xx, credentials refused) throws `GoogleFault`, so it can never become a pass.
 */
import { createHash } from 'node:crypto';
import { Fault } from '../core/fault.js';
import { importPKCS8, SignJWT } from 'jose';
import type { RecallValues } from '../core/gms/recallTarget.js';
import type { GoogleServiceAccount, IntegrityTokenDecoder } from '../core/ports.js';
import { BodyTooLargeError, readBoundedText } from '../readBoundedBody.js';

/**
 * The most of one Google answer read, before any JSON parse: longer answers are cut off as they
 * stream, never read whole, and are a fault. Measured: the largest verdict of the fixtures
 * (test/fixtures/google, Google's documented payloads) is 929 bytes; every field Google's schema
 * (TokenPayloadExternal, PcTokenPayloadExternal) defines, each at its longest (a 500-character
 * requestHash and nonce, a 255-character package, every label of every verdict list, five
 * certificate digests) is 3.0 KB, 3.5 KB indented as Google sends it; an OAuth answer is an access token of at most 2 KB; Google's error answers are a few
 * hundred bytes. 16 KiB is five times that: an answer that nests 16 KiB of JSON costs about what a
 * garbage token does (test/google/upstreamAnswerCost.test.ts), where 1 MiB had cost 35 times.
 */
export const GOOGLE_MAX_ANSWER_BYTES = 16 * 1024;

export const GOOGLE_OAUTH_URL = 'https://oauth2.googleapis.com/token';
export const GOOGLE_PLAY_INTEGRITY_URL = 'https://playintegrity.googleapis.com';
export const PLAY_INTEGRITY_SCOPE = 'https://www.googleapis.com/auth/playintegrity';
export const JWT_BEARER_GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer';

type DecodeMethod = 'decodeIntegrityToken' | 'decodePcIntegrityToken';

/** A cached access token is replaced this long before Google says it expires. */
export const TOKEN_REFRESH_MARGIN_MS = 60_000;
/** Lifetime of the signed assertion; Google accepts at most one hour. */
const ASSERTION_SECONDS = 3600;

export type GoogleFaultCode =
  | 'timeout'
  | 'unreachable'
  | 'rate_limited'
  | 'server_error'
  | 'unauthorized'
  | 'forbidden'
  | 'oauth_refused'
  | 'bad_response'
  | 'credentials';

/** No verdict from Google: a fault (HTTP 500), logged with `code`. Never carries a secret. */
export class GoogleFault extends Fault {
  override readonly name = 'GoogleFault';
  declare readonly code: GoogleFaultCode;
  constructor(code: GoogleFaultCode, message: string) {
    super(code, message, { retryAfterSeconds: retryAfterOf(code) });
  }
}

/** Google failing or slow: a retry may meet it soon; refused credentials or a malformed answer need an operator. */
function retryAfterOf(code: GoogleFaultCode): number {
  if (code === 'timeout' || code === 'unreachable' || code === 'server_error') return 1;
  return code === 'rate_limited' ? 30 : 60;
}

/** More decodes in flight than the deployment allows: answer 503 with Retry-After. */
export class GoogleBusyError extends Fault {
  override readonly name = 'GoogleBusyError';
  constructor(message: string) {
    // a slow Google holds at most the configured number of requests; the rest retry shortly
    super('google_busy', message, { retryAfterSeconds: 1, unavailable: 'Busy, retry shortly' });
  }
}

/** One exchange with Google, for metrics. */
export interface GoogleEvent {
  endpoint: 'token' | 'decode' | 'recall';
  outcome: 'ok' | 'rejected' | 'busy' | GoogleFaultCode;
}

export interface PlayIntegrityClientOptions {
  oauthUrl?: string;
  /** base URL; the paths `/v1/{packageName}:decodeIntegrityToken` and `/v1/{packageName}/deviceRecall:write` are appended */
  playIntegrityUrl?: string;
  /** bound on one decode or recall write, access token included (ms) */
  timeoutMs: number;
  /** decodes and recall writes in flight at once; one more is refused with `GoogleBusyError` */
  maxInFlight: number;
  /** the clock for token expiry and assertion times (ms since the epoch) */
  now?: () => number;
  onEvent?: (event: GoogleEvent) => void;
}

interface AccessToken {
  token: string;
  expiresAt: number;
}

/**
 * Creates the decoder. Access tokens are cached per service account until shortly before they
 * expire; concurrent requests share one token request.
 */
export function createPlayIntegrityClient(
  options: PlayIntegrityClientOptions,
): IntegrityTokenDecoder &
  DeviceRecallWriter & {
    inFlight(): number;
    probe(request: {
      packageName: string;
      integrityToken: string;
      serviceAccount: GoogleServiceAccount;
    }): Promise<{ status: number; detail: string }>;
  } {
  const oauthUrl = options.oauthUrl ?? GOOGLE_OAUTH_URL;
  const baseUrl = (options.playIntegrityUrl ?? GOOGLE_PLAY_INTEGRITY_URL).replace(/\/+$/, '');
  const now = options.now ?? Date.now;
  const emit = options.onEvent ?? (() => {});
  const { timeoutMs, maxInFlight } = options;
  if (!(timeoutMs > 0) || !(maxInFlight >= 1))
    throw new TypeError('createPlayIntegrityClient: timeoutMs and maxInFlight must be positive');
  const tokens = new Map<string, { value?: AccessToken; pending?: Promise<AccessToken> }>();
  let inFlight = 0;

  async function accessToken(account: GoogleServiceAccount, signal: AbortSignal): Promise<string> {
    const key = cacheKey(account);
    let entry = tokens.get(key);
    if (!entry) tokens.set(key, (entry = {}));
    if (entry.value && now() < entry.value.expiresAt - TOKEN_REFRESH_MARGIN_MS)
      return entry.value.token;
    const slot = entry;
    // the shared request has its own time bound: one caller giving up must not fail the others
    slot.pending ??= fetchAccessToken(account)
      .then((value) => (slot.value = value))
      .finally(() => {
        slot.pending = undefined;
      });
    return (await untilAborted(slot.pending, signal)).token;
  }

  function forget(account: GoogleServiceAccount, token: string): void {
    const entry = tokens.get(cacheKey(account));
    if (entry?.value?.token === token) entry.value = undefined;
  }

  async function fetchAccessToken(account: GoogleServiceAccount): Promise<AccessToken> {
    let key;
    try {
      key = await importPKCS8(account.privateKey, 'RS256');
    } catch {
      throw new GoogleFault(
        'credentials',
        `the service account ${account.clientEmail} has no usable RSA key`,
      );
    }
    const iat = Math.floor(now() / 1000);
    const assertion = await new SignJWT({ scope: PLAY_INTEGRITY_SCOPE })
      .setProtectedHeader({
        alg: 'RS256',
        typ: 'JWT',
        ...(account.privateKeyId ? { kid: account.privateKeyId } : {}),
      })
      .setIssuer(account.clientEmail)
      .setAudience(oauthUrl)
      .setIssuedAt(iat)
      .setExpirationTime(iat + ASSERTION_SECONDS)
      .sign(key);
    const started = now();
    const { status, body } = await exchange(
      'token',
      oauthUrl,
      {
        method: 'POST',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ grant_type: JWT_BEARER_GRANT, assertion }).toString(),
      },
      AbortSignal.timeout(timeoutMs),
    );
    if (status !== 200) {
      const fault = httpFault(
        status,
        `the OAuth token endpoint answered HTTP ${status}${oauthError(body)} for ${account.clientEmail}`,
        'oauth_refused',
      );
      emit({ endpoint: 'token', outcome: fault.code });
      throw fault;
    }
    const b = body as { access_token?: unknown; expires_in?: unknown } | null;
    if (
      typeof b?.access_token !== 'string' ||
      typeof b.expires_in !== 'number' ||
      !(b.expires_in > 0)
    ) {
      emit({ endpoint: 'token', outcome: 'bad_response' });
      throw new GoogleFault(
        'bad_response',
        'the OAuth token endpoint answered without access_token and expires_in',
      );
    }
    emit({ endpoint: 'token', outcome: 'ok' });
    return { token: b.access_token, expiresAt: started + b.expires_in * 1000 };
  }

  async function callDecode(
    packageName: string,
    integrityToken: string,
    token: string,
    signal: AbortSignal,
    method: DecodeMethod,
  ) {
    return exchange(
      'decode',
      `${baseUrl}/v1/${encodeURIComponent(packageName)}:${method}`,
      {
        method: 'POST',
        headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
        // decodePcIntegrityToken's body is DecodePcIntegrityTokenRequest { integrityToken }
        body: JSON.stringify(
          method === 'decodePcIntegrityToken'
            ? { integrityToken }
            : { integrity_token: integrityToken },
        ),
      },
      signal,
    );
  }

  /** One HTTP exchange with its JSON body; no answer in time or no connection is a fault. */
  async function exchange(
    endpoint: GoogleEvent['endpoint'],
    url: string,
    init: RequestInit,
    signal: AbortSignal,
  ): Promise<{ status: number; body: unknown }> {
    let status = 0;
    try {
      const res = await fetch(url, { ...init, signal, redirect: 'error' });
      status = res.status;
      const text = await readBoundedText(res, GOOGLE_MAX_ANSWER_BYTES);
      let body: unknown = null;
      try {
        body = JSON.parse(text);
      } catch {
        // an HTML error page from a proxy: the status says enough
      }
      return { status, body };
    } catch (err) {
      // a long error page (a proxy's 502): its status says enough, its body is not read
      if (err instanceof BodyTooLargeError && status !== 200) return { status, body: null };
      if (err instanceof BodyTooLargeError) {
        emit({ endpoint, outcome: 'bad_response' });
        throw new GoogleFault(
          'bad_response',
          `${hostOf(url)} sent an answer longer than ${GOOGLE_MAX_ANSWER_BYTES} bytes`,
        );
      }
      const fault = signal.aborted
        ? new GoogleFault('timeout', `no answer from ${hostOf(url)} within ${timeoutMs} ms`)
        : new GoogleFault('unreachable', `cannot reach ${hostOf(url)}: ${networkCause(err)}`);
      emit({ endpoint, outcome: fault.code });
      throw fault;
    }
  }

  async function decode(request: {
    packageName: string;
    integrityToken: string;
    serviceAccount: GoogleServiceAccount;
    method?: DecodeMethod;
  }) {
    if (inFlight >= maxInFlight) {
      emit({ endpoint: 'decode', outcome: 'busy' });
      throw new GoogleBusyError(`${maxInFlight} Google decodes are already in flight`);
    }
    inFlight += 1;
    try {
      const signal = AbortSignal.timeout(timeoutMs);
      const { packageName, integrityToken, serviceAccount } = request;
      const method = request.method ?? 'decodeIntegrityToken';
      let token = await accessToken(serviceAccount, signal);
      let answer = await callDecode(packageName, integrityToken, token, signal, method);
      if (answer.status === 401) {
        // revoked or expired early: one fresh token, then give up
        emit({ endpoint: 'decode', outcome: 'unauthorized' });
        forget(serviceAccount, token);
        token = await accessToken(serviceAccount, signal);
        answer = await callDecode(packageName, integrityToken, token, signal, method);
      }
      const { status, body } = answer;
      if (status === 200) {
        const payload = (body as { tokenPayloadExternal?: unknown } | null)?.tokenPayloadExternal;
        if (typeof payload !== 'object' || payload === null) {
          emit({ endpoint: 'decode', outcome: 'bad_response' });
          throw new GoogleFault('bad_response', `${method} answered without tokenPayloadExternal`);
        }
        emit({ endpoint: 'decode', outcome: 'ok' });
        return { ok: true as const, payload };
      }
      if (status >= 400 && status < 500 && status !== 401 && status !== 403 && status !== 429) {
        emit({ endpoint: 'decode', outcome: 'rejected' });
        return {
          ok: false as const,
          problem: `Google refused the token: HTTP ${status}${googleStatus(body)}`,
        };
      }
      const fault = httpFault(
        status,
        `${method} answered HTTP ${status}${googleStatus(body)} for ${packageName}`,
        'bad_response',
      );
      emit({ endpoint: 'decode', outcome: fault.code });
      throw fault;
    } finally {
      inFlight -= 1;
    }
  }

  /**
   * Play device recall: `POST v1/{packageName}/deviceRecall:write` with the integrity token and
   * the new values (Google's WriteDeviceRecallRequest; its answer is an empty object). Any answer
   * but 200 is a refusal with Google's status; no answer within timeoutMs, no connection or
   * unusable credentials throw GoogleFault; one more than maxInFlight throws GoogleBusyError.
   */
  async function writeDeviceRecall(request: DeviceRecallWrite): Promise<DeviceRecallWritten> {
    if (inFlight >= maxInFlight) {
      emit({ endpoint: 'recall', outcome: 'busy' });
      throw new GoogleBusyError(`${maxInFlight} Google requests are already in flight`);
    }
    inFlight += 1;
    try {
      const signal = AbortSignal.timeout(timeoutMs);
      const { packageName, integrityToken, serviceAccount, newValues } = request;
      const call = (token: string) =>
        exchange(
          'recall',
          `${baseUrl}/v1/${encodeURIComponent(packageName)}/deviceRecall:write`,
          {
            method: 'POST',
            headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
            // only the bits given: Google leaves a bit the request does not name as it was
            body: JSON.stringify({ integrityToken, newValues }),
          },
          signal,
        );
      let token = await accessToken(serviceAccount, signal);
      let answer = await call(token);
      if (answer.status === 401) {
        forget(serviceAccount, token);
        token = await accessToken(serviceAccount, signal);
        answer = await call(token);
      }
      const { status, body } = answer;
      if (status === 200) {
        emit({ endpoint: 'recall', outcome: 'ok' });
        return { ok: true };
      }
      const outcome = status >= 400 && status < 500 && status !== 429 ? 'rejected' : 'server_error';
      emit({ endpoint: 'recall', outcome: status === 429 ? 'rate_limited' : outcome });
      return { ok: false, status, problem: `HTTP ${status}${googleStatus(body)}` };
    } finally {
      inFlight -= 1;
    }
  }

  /**
   * One decode with a fresh access token, for `attest status --check`: Google's status and error
   * for `integrityToken` (meant to be a token that is not one). A refused grant, no answer within
   * timeoutMs (token and decode together) or no connection throws GoogleFault.
   */
  async function probe(request: {
    packageName: string;
    integrityToken: string;
    serviceAccount: GoogleServiceAccount;
  }): Promise<{ status: number; detail: string }> {
    const signal = AbortSignal.timeout(timeoutMs);
    const token = await accessToken(request.serviceAccount, signal);
    const { status, body } = await callDecode(
      request.packageName,
      request.integrityToken,
      token,
      signal,
      'decodeIntegrityToken',
    );
    return { status, detail: `HTTP ${status}${googleStatus(body)}` };
  }

  return { decode, writeDeviceRecall, probe, inFlight: () => inFlight };
}

/** One device recall write, for a package whose service account Google knows. */
export interface DeviceRecallWrite {
  packageName: string;
  integrityToken: string;
  serviceAccount: GoogleServiceAccount;
  newValues: RecallValues;
}

/** Google wrote the bits, or answered `status` (`problem` is its status and message, never the token). */
export type DeviceRecallWritten = { ok: true } | { ok: false; status: number; problem: string };

export interface DeviceRecallWriter {
  writeDeviceRecall(request: DeviceRecallWrite): Promise<DeviceRecallWritten>;
}

/** Keyed by the key itself too, so a replaced key file never reuses the old account's token. */
function cacheKey(account: GoogleServiceAccount): string {
  return `${account.clientEmail}\n${createHash('sha256').update(account.privateKey).digest('hex')}`;
}

/** 401 and 403 mean the credentials (or the project link) are wrong: the operator must act. */
function httpFault(status: number, message: string, otherwise: GoogleFaultCode): GoogleFault {
  if (status === 429) return new GoogleFault('rate_limited', message);
  if (status >= 500) return new GoogleFault('server_error', message);
  if (status === 401) return new GoogleFault('unauthorized', message);
  if (status === 403) return new GoogleFault('forbidden', message);
  return new GoogleFault(otherwise, message);
}

/** Waits for `work`, or rejects with a timeout fault when `signal` aborts first. */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted)
    return Promise.reject(new GoogleFault('timeout', 'no access token from Google in time'));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new GoogleFault('timeout', 'no access token from Google in time'));
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

/**
 * ` INVALID_ARGUMENT` from a Google API error body: its status code only. Google's message may
 * quote the request (the integrity token among it), so it is never copied into a fault or a log.
 */
function googleStatus(body: unknown): string {
  const e = (body as { error?: { status?: unknown } } | null)?.error;
  if (!e || typeof e !== 'object') return '';
  return typeof e.status === 'string' && /^[A-Z_]{1,64}$/.test(e.status) ? ` ${e.status}` : '';
}

/** ` (invalid_grant)` from an OAuth error body. */
function oauthError(body: unknown): string {
  const error = (body as { error?: unknown } | null)?.error;
  return typeof error === 'string' && /^[a-z_]{1,64}$/.test(error) ? ` (${error})` : '';
}

function networkCause(err: unknown): string {
  const cause = (err as { cause?: { code?: unknown; message?: unknown } })?.cause;
  return oneLine(String(cause?.code ?? cause?.message ?? (err as Error)?.message ?? err));
}

function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return 'Google';
  }
}

function oneLine(text: string): string {
  const t = text.replace(/[\u0000-\u001f\u007f]+/g, ' ').trim();
  return t.length > 120 ? `${t.slice(0, 120)}…` : t;
}
