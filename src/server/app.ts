import { randomBytes, randomUUID } from 'node:crypto';
import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { Logger } from 'pino';
import { encodeBase64 } from '../core/base64.js';
import type { RejectReason } from '../core/reasons.js';
import type { KeyMode, VerifyOutcome } from '../core/types.js';
import { finalNonce, parseEnvelope, type VerifyInput } from '../core/verify.js';
import type { ConsumeResult } from '../db/sessions.js';
import { GoogleBusyError } from '../google/playIntegrityClient.js';
import type { ApiKeyAuthenticator } from './apiKeyAuthenticator.js';
import type { Metrics } from './metrics.js';
import { OPENAPI_DOCUMENT } from './openapi.js';
import { parseVerifyRequest } from './verifyRequest.js';

export const STATUS_OK = 0;
export const STATUS_INTERNAL_ERROR = 268505088;
export const STATUS_INVALID_REQUEST = 268505089;
export const BODY_LIMIT_BYTES = 64 * 1024;

export interface AppDeps {
  logger: Logger;
  auth: Pick<ApiKeyAuthenticator, 'authenticate'>;
  sessions: {
    create(input: { reference: string; apiKeyId: string; serverNonce: Uint8Array; ttlSeconds: number }): Promise<{ expiresAt: Date }>;
    consume(reference: string, apiKeyId: string): Promise<ConsumeResult>;
  };
  /** the core verification, bound to the trust roots, allowlist and key store of the key's mode */
  verify(input: VerifyInput, mode: KeyMode): Promise<VerifyOutcome>;
  /** false: test-mode API keys answer 403 (ATTEST_TEST_KEYS=off); default true */
  testKeys?: boolean;
  metrics: Metrics;
  /** database reachable and migrations applied */
  ready(): Promise<boolean>;
  sessionTtlSeconds: number;
  /** a request that has not finished by then answers 500 (the driver itself never times out) */
  requestDeadlineMs?: number;
  /** told each time a request ran out of time waiting on the backend (the pool watchdog) */
  onBackendTimeout?: () => void;
  /** false when /metrics is served on a port of its own (ATTEST_METRICS_PORT) */
  metricsRoute?: boolean;
}

/** Fields of the one log line a request writes; handlers fill them in. */
interface RequestLog {
  requestId: string;
  method: string;
  route: string;
  apiKeyId?: string;
  /** the API key's mode */
  mode?: KeyMode;
  approach?: 'session' | 'sessionless';
  service?: string;
  isValid?: boolean;
  reason?: string;
  detail?: string;
  keyId?: string;
  packageName?: string;
  appId?: string;
  auth?: string;
  err?: { type: string; code?: string; message: string };
}

type Budget = <T>(work: Promise<T>) => Promise<T>;
type Env = { Variables: { log: RequestLog; keyId: string; mode: KeyMode; backend: Budget }; Bindings: { incoming?: { socket?: { remoteAddress?: string } } } };

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const ROUTES: Record<string, string[]> = {
  '/api/v1/attestation/init': ['POST'],
  '/api/v1/attestation/verify': ['POST'],
  '/healthz': ['GET', 'HEAD'],
  '/readyz': ['GET', 'HEAD'],
  '/metrics': ['GET'],
  '/openapi.json': ['GET'],
};

class DeadlineExceeded extends Error {
  override readonly name = 'DeadlineExceeded';
}

/** Races each backend call against what is left of `ms` for the request; time in between is free. */
function createBudget(ms: number): Budget {
  let used = 0;
  return async (work) => {
    const started = performance.now();
    let timer: NodeJS.Timeout | undefined;
    const remaining = ms - used;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new DeadlineExceeded(`no answer from the backend within ${ms} ms`)), Math.max(0, remaining));
    });
    try {
      return await Promise.race([work, deadline]);
    } finally {
      clearTimeout(timer);
      used += performance.now() - started;
    }
  };
}

/** The HTTP API: the contract of docs/http-api.md. No module state. */
export function createApp(deps: AppDeps): Hono<Env> {
  const app = new Hono<Env>();
  const deadlineMs = deps.requestDeadlineMs ?? 5000;

  // request id, timing and the single log line
  app.use('*', async (c, next) => {
    const started = performance.now();
    const given = c.req.header('x-request-id');
    const requestId = given && REQUEST_ID.test(given) ? given : randomUUID();
    const path = c.req.path;
    const log: RequestLog = { requestId, method: c.req.method, route: path in ROUTES ? path : 'unmatched' };
    c.set('log', log);
    try {
      await next();
    } finally {
      c.res.headers.set('X-Request-Id', requestId);
      const durationMs = Math.round((performance.now() - started) * 100) / 100;
      deps.metrics.observeRequest(log.route, c.req.method, c.res.status, durationMs / 1000);
      const level = c.res.status >= 500 ? 'error' : 'info';
      deps.logger[level]({ ...log, status: c.res.status, durationMs }, 'request');
    }
  });

  app.onError((err, c) => {
    const log = c.get('log');
    if (log) log.err = describeFault(err);
    if (err instanceof DeadlineExceeded) deps.onBackendTimeout?.();
    if (err instanceof GoogleBusyError) {
      // a slow Google holds at most the configured number of requests; the rest retry shortly
      c.header('Retry-After', String(err.retryAfterSeconds));
      return errorBody(c, 503, STATUS_INTERNAL_ERROR, 'Busy, retry shortly');
    }
    return errorBody(c, 500, STATUS_INTERNAL_ERROR, 'Internal error');
  });

  // a bounded answer even when the database hangs: the time spent waiting on the backend (not on
  // a slow client's body, which Node's own request timeout bounds) is capped per request
  app.use('/api/*', async (c, next) => {
    c.set('backend', createBudget(deadlineMs));
    await next();
  });

  // the key is checked before anything else under /api/, unknown paths included. Only its database
  // reads count against the deadline: time queued for argon2 is bounded by the hash queue itself
  app.use('/api/*', async (c, next) => {
    const address = c.env?.incoming?.socket?.remoteAddress;
    const result = await deps.auth.authenticate(c.req.header('x-api-key'), { address, backend: c.get('backend') });
    const log = c.get('log');
    if (!result.ok) {
      log.auth = result.why;
      if (result.keyId) log.apiKeyId = result.keyId;
      if (result.status === 503) {
        c.header('Retry-After', '1');
        return errorBody(c, 503, STATUS_INTERNAL_ERROR, 'Busy, retry shortly');
      }
      return c.body(null, result.status);
    }
    log.apiKeyId = result.keyId;
    log.mode = result.mode;
    if (result.mode === 'test' && deps.testKeys === false) {
      log.auth = 'test_keys_disabled';
      return c.body(null, 403);
    }
    c.set('keyId', result.keyId);
    c.set('mode', result.mode);
    await next();
  });

  app.post('/api/v1/attestation/init', async (c) => {
    const serverNonce = randomBytes(32);
    const reference = `ses_${randomBytes(24).toString('base64url')}`;
    const { expiresAt } = await c.get('backend')(
      deps.sessions.create({ reference, apiKeyId: c.get('keyId'), serverNonce, ttlSeconds: deps.sessionTtlSeconds }),
    );
    deps.metrics.sessionCreated();
    return c.json({ sessionReference: reference, serverNonce: encodeBase64(serverNonce), expiresAtUtc: expiresAt.toISOString(), statusCode: STATUS_OK });
  });

  app.post(
    '/api/v1/attestation/verify',
    bodyLimit({
      maxSize: BODY_LIMIT_BYTES,
      onError: (c) => errorBody(c, 413, STATUS_INVALID_REQUEST, `Request body larger than ${BODY_LIMIT_BYTES} bytes`),
    }),
    async (c) => {
      const log = c.get('log');
      if (!/^application\/json\s*(;|$)/i.test(c.req.header('content-type') ?? '')) {
        return errorBody(c, 400, STATUS_INVALID_REQUEST, 'Content-Type must be application/json');
      }
      let json: unknown;
      try {
        json = await c.req.json();
      } catch {
        return errorBody(c, 400, STATUS_INVALID_REQUEST, 'The body is not valid JSON');
      }
      const parsed = parseVerifyRequest(json);
      if (!parsed.ok) return errorBody(c, 400, STATUS_INVALID_REQUEST, parsed.message);
      const request = parsed.request;
      log.approach = request.approach;

      let nonce: Uint8Array;
      if (request.approach === 'session') {
        const consumed = await c.get('backend')(deps.sessions.consume(request.sessionReference, c.get('keyId')));
        if (!consumed.ok) {
          log.service = peekService(request.token);
          return rejected(c, consumed.reason, sessionDetail[consumed.reason]);
        }
        nonce = finalNonce(consumed.serverNonce, request.deviceNonce);
      } else {
        nonce = request.expectedNonce;
      }

      const outcome = await c.get('backend')(deps.verify({ token: request.token, expectedNonce: nonce }, c.get('mode')));
      Object.assign(log, pickFacts(outcome.facts));
      if (!outcome.ok) return rejected(c, outcome.reason, outcome.detail);
      log.isValid = true;
      deps.metrics.observeVerify(outcome.details.service, true, 'none', c.get('mode'));
      const { service, ...details } = outcome.details;
      return c.json({ isValid: true, statusCode: STATUS_OK, ...details });
    },
  );

  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  app.get('/readyz', async (c) => {
    const ready = await Promise.race([
      deps.ready().catch(() => false),
      new Promise<boolean>((resolve) => setTimeout(resolve, deadlineMs, false).unref()),
    ]);
    return c.json({ status: ready ? 'ready' : 'not ready' }, ready ? 200 : 503);
  });
  const metricsRoute = deps.metricsRoute ?? true;
  if (metricsRoute) {
    app.get('/metrics', async (c) => {
      const text = await deps.metrics.registry.metrics();
      return c.text(text, 200, { 'Content-Type': deps.metrics.registry.contentType });
    });
  }
  app.get('/openapi.json', (c) => c.json(OPENAPI_DOCUMENT));

  app.notFound((c) => {
    const allowed = c.req.path === '/metrics' && !metricsRoute ? undefined : ROUTES[c.req.path];
    if (allowed) {
      c.header('Allow', allowed.join(', '));
      return errorBody(c, 405, STATUS_INVALID_REQUEST, 'Method not allowed');
    }
    return errorBody(c, 404, STATUS_INVALID_REQUEST, 'Not found');
  });

  function rejected(c: Context<Env>, reason: RejectReason, detail: string) {
    const log = c.get('log');
    log.isValid = false;
    log.reason = reason;
    log.detail = detail;
    deps.metrics.observeVerify(log.service ?? 'unknown', false, reason, c.get('mode'));
    return c.json({ isValid: false, statusCode: STATUS_OK });
  }

  return app;
}

const sessionDetail: Record<'session_unknown' | 'session_consumed' | 'session_expired', string> = {
  session_unknown: 'no session with this reference for this API key',
  session_consumed: 'the session was already used',
  session_expired: 'the session expired before verify',
};

function errorBody(c: Context<Env>, status: 400 | 404 | 405 | 413 | 500 | 503, statusCode: number, errorMessage: string) {
  // the message names a rule of the request, never a secret: it is what `attest logs` shows for a 4xx
  const log = c.get('log');
  if (log && status < 500) log.detail = errorMessage;
  return c.json({ statusCode, errorMessage }, status);
}

/** The token's platform for logs and metrics when the session fails before verification. */
function peekService(token: Uint8Array): string | undefined {
  try {
    const { service } = parseEnvelope(token);
    return service === 'apple' || service === 'gms' ? service : undefined;
  } catch {
    return undefined;
  }
}

function pickFacts(facts: VerifyOutcome['facts']): Partial<RequestLog> {
  const out: Partial<RequestLog> = {};
  if (facts.service) out.service = facts.service;
  if (facts.keyId) out.keyId = facts.keyId;
  if (facts.packageName) out.packageName = facts.packageName;
  if (facts.appId) out.appId = facts.appId;
  return out;
}

/**
 * What a fault may say in the log. drizzle's messages embed the query parameters (session
 * references, keys), so only the driver's own error code and message are kept.
 */
export function describeFault(err: unknown): { type: string; code?: string; message: string } {
  const e = err as { name?: string; message?: string; code?: unknown; cause?: { code?: string; message?: string } };
  const cause = e?.cause;
  if (cause && typeof cause === 'object') {
    return { type: e.name ?? 'Error', ...(cause.code ? { code: String(cause.code) } : {}), message: String(cause.message ?? '').slice(0, 300) };
  }
  const message = String(e?.message ?? err);
  return {
    type: e?.name ?? 'Error',
    ...(typeof e?.code === 'string' ? { code: e.code } : {}),
    message: /failed query|params:/i.test(message) ? 'database query failed' : message.slice(0, 300),
  };
}
