/**
 * The typed client for a relying party's backend (`attest-client`, also exported as `attest-server/client`). It uses the platform's
 * `fetch` only, so importing it pulls in none of the service's own dependencies.
 *
 * Grant the protected operation only when `verify()` resolves with `isValid: true`: every 4xx/5xx
 * is thrown as an `AttestHttpError`, a network failure as an `AttestNetworkError`, a timeout as an
 * `AttestTimeoutError`, and a 200 whose body does not have the contract's shape as an
 * `AttestResponseError`. `init()` is retried (network failures, timeouts, 5xx) with bounded
 * backoff; `verify()` never is, since a verify that reached the server consumed its session.
 */
// the wire shapes the verifiers produce: a type-only import, so the client still loads no server code
import type { DeviceRecallDetails } from '../core/gms/gmsTokenDetails.js';
import { rejected, type Rejection } from './rejection.js';
import { DEVICE_RECALL_RESPONSE, INIT_RESPONSE, VERIFY_RESPONSE, validate } from './shapes.js';
import { DETAILS_FIELDS, type DetailsByService } from './detailsShapes.js';
import { consumeResultOf, type ConsumeResult } from './consumeResult.js';
import { readBoundedText } from '../readBoundedBody.js';
import {
  AttestError,
  AttestHttpError,
  AttestNetworkError,
  AttestResponseError,
  AttestTimeoutError,
  at,
  type AttestOperation,
} from './errors.js';

/** The most of one attest answer read (a verify answer is a few KB): more is a network error. */
const MAX_ANSWER_BYTES = 1024 * 1024;

export {
  AttestError,
  AttestHttpError,
  AttestNetworkError,
  AttestResponseError,
  AttestTimeoutError,
  HTTP_ERROR_KINDS,
  type AttestErrorCode,
  type AttestHttpErrorKind,
  type AttestOperation,
} from './errors.js';

export type { ConsumeResult } from './consumeResult.js';
export type { Rejection } from './rejection.js';
export type {
  DeviceJwk,
  DeviceKeyConfirmation,
  ResultTokenClaims,
} from '../core/resultTokenClaims.js';

export {
  verifyResultToken,
  AttestResultTokenError,
  type ResultTokenProblem,
  type VerifyResultTokenOptions,
} from './resultToken.js';

export { verifyPossession, type PossessionProof } from './verifyPossession.js';

export {
  INIT_RESPONSE,
  VERIFY_RESPONSE,
  CONSUME_RESPONSE,
  RESULT_TOKEN_CLAIMS,
  DEVICE_RECALL_RESPONSE,
  ERROR_BODY,
  type Shape,
} from './shapes.js';
// every kind's details shapes and types (APPLE_TOKEN_DETAILS, AppleTokenDetails...), generated
export * from './detailsShapes.js';

/** `statusCode` of an invalid request (HTTP 400, 413). */
export const STATUS_INVALID_REQUEST = 268505089;
/** `statusCode` of an internal error (HTTP 500, 503). */
export const STATUS_INTERNAL_ERROR = 268505088;

export interface AttestSession {
  sessionReference: string;
  /** base64, 32 bytes: give it to the device */
  serverNonce: string;
  /** ISO 8601, UTC */
  expiresAtUtc: string;
  statusCode: 0;
}

export type { DeviceRecallDetails };

/**
 * A verify answer (HTTP 200): valid with the platform's details, or rejected without a reason.
 * `resultToken` comes with valid answers to API keys that have result tokens on: hand it to
 * other services, which check it with `verifyResultToken`.
 */
/** the details fields as a message names them: `appleTokenDetails, googleTokenDetails, ... and ...` */
const DETAILS_NAMES = DETAILS_FIELDS.map(([, field]) => field)
  .join(', ')
  .replace(/, (\w+)$/, ' and $1');

export type VerifyResult =
  | {
      [S in keyof DetailsByService]: {
        isValid: true;
        statusCode: 0;
        service: S;
        resultToken?: string;
      } & DetailsByService[S];
    }[keyof DetailsByService]
  | { isValid: false; statusCode: 0; rejection?: Rejection };

/** Base64 strings as the wire carries them, or bytes (sent as standard base64). */
export type Base64Input = string | Uint8Array;

export type VerifyRequest =
  | {
      attestationToken: Base64Input;
      sessionReference: string;
      deviceNonce?: Base64Input;
      expectedNonce?: never;
    }
  | {
      attestationToken: Base64Input;
      expectedNonce: Base64Input;
      sessionReference?: never;
      deviceNonce?: never;
    };

/**
 * A Play device recall write: the token the RP verified, and the bits to set (`true`) or clear
 * (`false`); a bit not named keeps its value at Google.
 */
export interface DeviceRecallRequest {
  attestationToken: Base64Input;
  bits: { bitFirst?: boolean; bitSecond?: boolean; bitThird?: boolean };
}

export interface CallOptions {
  /** sent as `X-Request-Id` (1 to 128 of `[A-Za-z0-9._:-]`), so the service's log line carries it */
  requestId?: string;
  /** aborts the call (and, for init, its retries) */
  signal?: AbortSignal;
}

export interface AttestClientOptions {
  /** the service's base URL, e.g. `https://attest.internal:8080` */
  baseUrl: string;
  apiKey: string;
  /** per HTTP attempt; default 10 000 */
  timeoutMs?: number;
  /** init only: attempts after the first; default 2 */
  initRetries?: number;
  /** init only: first backoff, doubled per attempt; default 200 */
  retryDelayMs?: number;
  /** cap on any wait, Retry-After included; default 5 000 */
  maxRetryDelayMs?: number;
  /** injected for tests */
  fetch?: typeof globalThis.fetch;
  /** injected for tests: how the client waits between init attempts */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** injected for tests: the clock Retry-After dates are read against */
  now?: () => Date;
}

export interface AttestClient {
  /** Opens a session (session approach); retried on network failures, timeouts and 5xx. */
  init(options?: CallOptions): Promise<AttestSession>;
  /** Verifies a token; never retried. Resolves only on HTTP 200 with the contract's body. */
  verify(request: VerifyRequest, options?: CallOptions): Promise<VerifyResult>;
  /**
   * Consumes a result token of the deployment once (replay protection); never retried, since a
   * consume that reached the service used the token up: after a network failure or a timeout
   * the outcome is unknown, and a second call answers `alreadyConsumed: true`.
   */
  consumeResultToken(resultToken: string, options?: CallOptions): Promise<ConsumeResult>;
  /**
   * Marks the device of a verified Play Integrity token through Google's device recall; never
   * retried. `written: false`: nothing changed (not such a token, or Google refused or was slow).
   */
  writeDeviceRecall(
    request: DeviceRecallRequest,
    options?: CallOptions,
  ): Promise<{ written: boolean }>;
}

const INIT_PATH = 'api/v1/attestation/init';
const VERIFY_PATH = 'api/v1/attestation/verify';
const CONSUME_PATH = 'api/v1/results/consume';
const DEVICE_RECALL_PATH = 'api/v1/android/device-recall';

/**
 * Creates a client; options are checked here, once.
 * @param options base URL, API key, timeout and (init) retry policy
 */
export function createAttestClient(options: AttestClientOptions): AttestClient {
  const base = parseBaseUrl(options.baseUrl);
  if (typeof options.apiKey !== 'string' || options.apiKey.length === 0)
    throw new TypeError('apiKey must be a non-empty string');
  const timeoutMs = positive('timeoutMs', options.timeoutMs ?? 10_000);
  const retries = count('initRetries', options.initRetries ?? 2);
  const retryDelayMs = count('retryDelayMs', options.retryDelayMs ?? 200);
  const maxRetryDelayMs = count('maxRetryDelayMs', options.maxRetryDelayMs ?? 5_000);
  const doFetch = options.fetch ?? globalThis.fetch;
  const sleep = options.sleep ?? defaultSleep;
  const now = options.now ?? (() => new Date());

  async function post(
    operation: AttestOperation,
    path: string,
    body: string | undefined,
    call: CallOptions,
  ) {
    const headers: Record<string, string> = {
      'X-Api-Key': options.apiKey,
      Accept: 'application/json',
    };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (call.requestId !== undefined) headers['X-Request-Id'] = call.requestId;
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = call.signal ? AbortSignal.any([call.signal, timeout]) : timeout;
    let res: Response;
    let text: string;
    const url = new URL(path, base);
    try {
      res = await doFetch(url, {
        method: 'POST',
        headers,
        body: body ?? null,
        signal,
        redirect: 'error',
      });
      // the body is read under the same timeout: a server that stalls mid-body is a timeout too
      text = await readBoundedText(res, MAX_ANSWER_BYTES);
    } catch (err) {
      if (call.signal?.aborted) throw call.signal.reason;
      if (timeout.aborted) throw at(new AttestTimeoutError(operation, timeoutMs), url);
      throw at(new AttestNetworkError(operation, err), url);
    }
    return {
      url,
      status: res.status,
      headers: res.headers,
      text,
      requestId: res.headers.get('x-request-id') ?? undefined,
    };
  }

  function httpError(operation: AttestOperation, answer: Awaited<ReturnType<typeof post>>) {
    return at(
      new AttestHttpError(
        operation,
        answer.status,
        errorBody(answer.text),
        answer.requestId,
        answer.headers.get('retry-after') ?? undefined,
      ),
      answer.url,
    );
  }

  return {
    async init(call = {}) {
      for (let attempt = 0; ; attempt++) {
        let failure: AttestError;
        try {
          const answer = await post('init', INIT_PATH, undefined, call);
          if (answer.status === 200) {
            const body = parseJson(answer.text);
            const problem = validate(INIT_RESPONSE, body);
            if (problem)
              throw at(new AttestResponseError('init', problem, answer.requestId), answer.url);
            const { sessionReference, serverNonce, expiresAtUtc } = body as AttestSession;
            return { sessionReference, serverNonce, expiresAtUtc, statusCode: 0 };
          }
          failure = httpError('init', answer);
        } catch (err) {
          if (!(err instanceof AttestNetworkError || err instanceof AttestTimeoutError)) throw err;
          failure = err;
        }
        const retryable = !(failure instanceof AttestHttpError) || failure.status >= 500;
        if (!retryable || attempt >= retries) throw failure;
        const backoff = Math.min(maxRetryDelayMs, retryDelayMs * 2 ** attempt);
        const asked =
          failure instanceof AttestHttpError ? retryAfterMs(failure.retryAfter, now()) : undefined;
        await sleep(asked === undefined ? backoff : Math.min(maxRetryDelayMs, asked), call.signal);
      }
    },

    async verify(request, call = {}) {
      const body = JSON.stringify(verifyBody(request));
      const answer = await post('verify', VERIFY_PATH, body, call);
      if (answer.status !== 200) throw httpError('verify', answer);
      const json = parseJson(answer.text);
      const problem = validate(VERIFY_RESPONSE, json);
      if (problem)
        throw at(new AttestResponseError('verify', problem, answer.requestId), answer.url);
      const result = json as {
        isValid: boolean;
        resultToken?: string;
        rejection?: Rejection;
      } & Partial<Record<(typeof DETAILS_FIELDS)[number][1], object>>;
      if (result.isValid !== true) return rejected(result.rejection);
      const token = result.resultToken === undefined ? {} : { resultToken: result.resultToken };
      // a valid token names exactly one platform; without its details the RP could not check the app binding
      const named = DETAILS_FIELDS.filter(([, field]) => result[field]);
      if (named.length === 1) {
        const [service, field] = named[0]!;
        return {
          isValid: true,
          statusCode: 0,
          service,
          [field]: result[field],
          ...token,
        } as VerifyResult;
      }
      throw at(
        new AttestResponseError(
          'verify',
          `isValid true needs exactly one of ${DETAILS_NAMES}`,
          answer.requestId,
        ),
        answer.url,
      );
    },

    async consumeResultToken(resultToken, call = {}) {
      if (typeof resultToken !== 'string' || resultToken.length === 0)
        throw new TypeError('resultToken must be a non-empty string');
      const body = JSON.stringify({ resultToken });
      const answer = await post('consume', CONSUME_PATH, body, call);
      if (answer.status !== 200) throw httpError('consume', answer);
      return consumeResultOf(parseJson(answer.text), answer);
    },

    async writeDeviceRecall(request, call = {}) {
      const bits = request?.bits;
      const names = ['bitFirst', 'bitSecond', 'bitThird'];
      // the service would answer 400; saying so here names the mistake without a round trip
      if (
        typeof bits !== 'object' ||
        bits === null ||
        Object.keys(bits).length === 0 ||
        Object.entries(bits).some(([k, v]) => !names.includes(k) || typeof v !== 'boolean')
      )
        throw new TypeError(
          'writeDeviceRecall needs bits: one to three of bitFirst, bitSecond, bitThird, as booleans',
        );
      const body = JSON.stringify({
        attestationToken: toBase64(request.attestationToken, 'attestationToken'),
        bits,
      });
      const answer = await post('writeDeviceRecall', DEVICE_RECALL_PATH, body, call);
      if (answer.status !== 200) throw httpError('writeDeviceRecall', answer);
      const json = parseJson(answer.text);
      const problem = validate(DEVICE_RECALL_RESPONSE, json);
      if (problem)
        throw at(
          new AttestResponseError('writeDeviceRecall', problem, answer.requestId),
          answer.url,
        );
      return { written: (json as { written: boolean }).written };
    },
  };
}

function verifyBody(request: VerifyRequest): Record<string, string> {
  const out: Record<string, string> = {
    attestationToken: toBase64(request.attestationToken, 'attestationToken'),
  };
  const hasSession = request.sessionReference !== undefined;
  const hasNonce = request.expectedNonce !== undefined;
  // the service would answer 400; saying so here names the mistake without a round trip
  if (hasSession === hasNonce)
    throw new TypeError('verify needs exactly one of sessionReference and expectedNonce');
  if (hasSession) {
    out.sessionReference = request.sessionReference!;
    if (request.deviceNonce !== undefined)
      out.deviceNonce = toBase64(request.deviceNonce, 'deviceNonce');
  } else {
    if (request.deviceNonce !== undefined)
      throw new TypeError('deviceNonce belongs to the session approach, not with expectedNonce');
    out.expectedNonce = toBase64(request.expectedNonce!, 'expectedNonce');
  }
  return out;
}

function toBase64(value: Base64Input, field: string): string {
  if (typeof value === 'string') return value;
  if (value instanceof Uint8Array)
    return Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('base64');
  throw new TypeError(`${field} must be a base64 string or a Uint8Array`);
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function errorBody(text: string): { statusCode: number; errorMessage: string } | undefined {
  const json = parseJson(text) as { statusCode?: unknown; errorMessage?: unknown } | undefined;
  if (
    json &&
    typeof json === 'object' &&
    Number.isInteger(json.statusCode) &&
    typeof json.errorMessage === 'string'
  ) {
    return { statusCode: json.statusCode as number, errorMessage: json.errorMessage };
  }
  return undefined;
}

/** Retry-After as delay-seconds or an HTTP date; `undefined` when absent or unreadable. */
function retryAfterMs(value: string | undefined, now: Date): number | undefined {
  if (value === undefined) return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now.getTime());
}

function parseBaseUrl(value: string): URL {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new TypeError(`baseUrl is not a URL: ${JSON.stringify(value)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new TypeError('baseUrl must be http: or https:');
  // paths resolve against the base: keep a mount prefix such as /attest/
  if (!url.pathname.endsWith('/')) url.pathname += '/';
  return url;
}

function positive(name: string, value: number): number {
  if (!Number.isFinite(value) || value <= 0)
    throw new TypeError(`${name} must be a positive number`);
  return value;
}

function count(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 0)
    throw new TypeError(`${name} must be a whole number, 0 or more`);
  return value;
}

function defaultSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
