/**
 * The errors the client throws: every one an `AttestError` with a stable `code`, and the URL it
 * concerns. Apart from the client itself so that it stays one small file per concern.
 */
export type AttestHttpErrorKind =
  | 'invalid_request'
  | 'unauthorized'
  | 'forbidden'
  | 'not_found'
  | 'too_large'
  | 'internal_error'
  | 'unavailable'
  | 'unexpected_status';

export type AttestErrorCode =
  | 'ERR_ATTEST_HTTP'
  | 'ERR_ATTEST_NETWORK'
  | 'ERR_ATTEST_TIMEOUT'
  | 'ERR_ATTEST_RESPONSE'
  | 'ERR_ATTEST_RESULT_TOKEN';

/**
 * Every error the client throws (except an abort through the caller's own signal, which rethrows
 * its reason), a refused result token (AttestResultTokenError) included.
 */
export abstract class AttestError extends Error {
  abstract readonly code: AttestErrorCode;
  /** the service's `X-Request-Id`, when an answer came */
  readonly requestId: string | undefined;
  /** the URL the client called (also in the message: a wrong baseUrl shows at once) */
  url: string | undefined;
  constructor(message: string, requestId: string | undefined, options?: ErrorOptions) {
    super(message, options);
    this.requestId = requestId;
  }
}

/** The error with the URL it concerns, in `url` and in its message. */
export function at<E extends AttestError>(err: E, url: URL): E {
  err.url = url.href;
  err.message = `${err.message} (${url.href})`;
  return err;
}

/** The service answered with a status other than 200. */
export class AttestHttpError extends AttestError {
  override readonly name = 'AttestHttpError';
  readonly code = 'ERR_ATTEST_HTTP' as const;
  readonly kind: AttestHttpErrorKind;
  /** the contract's `statusCode` when the body carried one (400, 413, 500, 503) */
  readonly statusCode: number | undefined;
  readonly errorMessage: string | undefined;
  /** the `Retry-After` header as the service sent it */
  readonly retryAfter: string | undefined;
  constructor(
    readonly operation: AttestOperation,
    readonly status: number,
    body: { statusCode: number; errorMessage: string } | undefined,
    requestId: string | undefined,
    retryAfter: string | undefined,
  ) {
    super(
      `${operation}: HTTP ${status}${body ? ` (statusCode ${body.statusCode}: ${body.errorMessage})` : ''}`,
      requestId,
    );
    this.kind = kindOf(status);
    this.statusCode = body?.statusCode;
    this.errorMessage = body?.errorMessage;
    this.retryAfter = retryAfter;
  }
}

/** The client call an error came from. */
export type AttestOperation = 'init' | 'verify' | 'consume' | 'writeDeviceRecall';

/** No answer: connection refused or reset, DNS failure, TLS failure. */
export class AttestNetworkError extends AttestError {
  override readonly name = 'AttestNetworkError';
  readonly code = 'ERR_ATTEST_NETWORK' as const;
  constructor(
    readonly operation: AttestOperation,
    cause: unknown,
  ) {
    super(`${operation}: no answer from the attestation service (${describe(cause)})`, undefined, {
      cause,
    });
  }
}

/** No complete answer within `timeoutMs`. */
export class AttestTimeoutError extends AttestError {
  override readonly name = 'AttestTimeoutError';
  readonly code = 'ERR_ATTEST_TIMEOUT' as const;
  constructor(
    readonly operation: AttestOperation,
    readonly timeoutMs: number,
  ) {
    super(`${operation}: no answer within ${timeoutMs} ms`, undefined);
  }
}

/** HTTP 200 with a body that is not the contract's (the client never guesses a verdict from it). */
export class AttestResponseError extends AttestError {
  override readonly name = 'AttestResponseError';
  readonly code = 'ERR_ATTEST_RESPONSE' as const;
  constructor(
    readonly operation: AttestOperation,
    readonly problem: string,
    requestId: string | undefined,
  ) {
    super(`${operation}: unexpected response: ${problem}`, requestId);
  }
}

/** What each status the contract lists means; any other is `unexpected_status` (or `internal_error` for 5xx). */
export const HTTP_ERROR_KINDS: Readonly<Record<number, AttestHttpErrorKind>> = {
  400: 'invalid_request',
  401: 'unauthorized',
  403: 'forbidden',
  // consume on a deployment that signs no result tokens (no issuer)
  404: 'not_found',
  413: 'too_large',
  500: 'internal_error',
  503: 'unavailable',
};

export function kindOf(status: number): AttestHttpErrorKind {
  return HTTP_ERROR_KINDS[status] ?? (status >= 500 ? 'internal_error' : 'unexpected_status');
}

function describe(err: unknown): string {
  const cause = (err as { cause?: { code?: string; message?: string } } | undefined)?.cause;
  return cause?.code ?? cause?.message ?? (err instanceof Error ? err.message : String(err));
}
