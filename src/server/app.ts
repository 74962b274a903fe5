import { randomBytes } from 'node:crypto';
import { Hono, type Context } from 'hono';
import type { Logger } from 'pino';
import { encodeBase64 } from '../core/base64.js';
import type { RejectReason } from '../core/reasons.js';
import { isService } from '../core/services.js';
import type { KeyMode } from '../core/ports.js';
import type { RemediationDialog } from '../core/gms/gmsTokenDetails.js';
import type { VerifyOutcome } from '../core/outcome.js';
import { finalNonce, type VerifyInput } from '../core/verify.js';
import { parseEnvelope } from '../core/envelope.js';
import { LIVE_JWKS_PATH, TEST_JWKS_PATH } from '../core/resultToken.js';
import type { DatabaseBreaker } from '../db/databaseBreaker.js';
import { isDatabaseTimeout } from '../db/databaseDeadline.js';
import type { WriteHealth } from '../db/writeHealth.js';
import type { ConsumeResult } from '../db/sessions.js';
import type { ApiKeyAuthenticator } from './apiKeyAuthenticator.js';
import type { AppEnv, RequestLog } from './appEnv.js';
import {
  errorBody,
  STATUS_INTERNAL_ERROR,
  STATUS_INVALID_REQUEST,
  STATUS_OK,
} from './errorBody.js';
import { METRICS_CONTENT_TYPE, type Metrics } from './metrics.js';
import type { ClientAddress } from './clientAddress.js';
import { apiKeyAuth } from './middleware/apiKeyAuth.js';
import { backendBudget, SUSPECT_AFTER_MS } from './middleware/backendBudget.js';
import { requestLog } from './middleware/requestLog.js';
import { verifyCounter } from './middleware/verifyCounter.js';
import { OPENAPI_DOCUMENT } from './openapi.js';
import { createApiDocs } from './apiDocs.js';
import { DEVICE_RECALL_PATH, deviceRecallHandler, type DeviceRecallWrite } from './deviceRecall.js';
import { readJson } from './readJson.js';
import type { ResultTokenSigner } from './resultTokenSigner.js';
import type { StatsRecorder } from './statsRecorder.js';
import type { Telemetry } from './telemetry.js';
import { parseVerifyRequest } from './verifyRequest.js';
import { parseConsumeRequest } from './consumeRequest.js';
import type { ResultConsumer } from './resultConsumer.js';
import { truncate } from './boundLogFields.js';
import { faultAnswer } from './faultAnswer.js';

export const BODY_LIMIT_BYTES = 64 * 1024;
/** A consume's body: a result token (at most RESULT_TOKEN_MAX_CHARS) and its JSON. */
export const CONSUME_BODY_LIMIT_BYTES = 16 * 1024;

export interface AppDeps {
  logger: Logger;
  auth: Pick<ApiKeyAuthenticator, 'authenticate'>;
  sessions: {
    create(input: {
      reference: string;
      apiKeyId: string;
      serverNonce: Uint8Array;
      ttlSeconds: number;
    }): Promise<{ expiresAt: Date }>;
    consume(reference: string, apiKeyId: string): Promise<ConsumeResult>;
  };
  /** the core verification, bound to the trust roots, allowlist and key store of the key's mode */
  verify(input: VerifyInput, mode: KeyMode, apiKeyId: string): Promise<VerifyOutcome>;
  /** false: test-mode API keys answer 403 (ATTEST_TEST_KEYS=off); default true */
  testKeys?: boolean;
  metrics: Metrics;
  /** OTLP export (OTEL_* variables): a span per API request */
  telemetry?: Pick<Telemetry, 'traceRequest'> | undefined;
  /** database reachable and migrations applied */
  ready(): Promise<boolean>;
  sessionTtlSeconds: number;
  /** a request that has not finished by then answers 500 (the driver itself never times out) */
  requestDeadlineMs?: number;
  /** told each time a request ran out of time waiting on the backend (the pool watchdog) */
  onBackendTimeout?: (cause: unknown) => void;
  /** whether the database takes writes: /readyz answers 503 while it does not */
  writeHealth?: Pick<WriteHealth, 'observe' | 'writable'>;
  /**
   * PostgreSQL: the circuit breaker on the database. While open, requests that need the database
   * answer 500 at once (with Retry-After) and /readyz 503, instead of after the deadline.
   */
  breaker?: Pick<DatabaseBreaker, 'isOpen' | 'check' | 'failed' | 'suspect' | 'onOpen'>;
  /** false when /metrics is served on a port of its own (ATTEST_METRICS_PORT) */
  metricsRoute?: boolean;
  /** what /metrics answers when not `metrics`' own registry: a cluster worker's is every worker's sum */
  scrape?: () => Promise<string>;
  /**
   * Signs the result tokens of keys that use them and publishes the keys (/.well-known/...).
   * Absent (ATTEST_ISSUER unset): those routes answer 404 and a valid verify of such a key 500.
   */
  resultTokens?: Pick<ResultTokenSigner, 'issuer' | 'sign' | 'jwks'>;
  /**
   * Signs the result tokens of test-mode keys with the test keys (`test: true`), published at
   * TEST_JWKS_PATH only. Absent (no issuer, or ATTEST_TEST_KEYS off): that route answers 404.
   */
  testResultTokens?: Pick<ResultTokenSigner, 'issuer' | 'sign' | 'jwks'>;
  /** consumes result tokens once (POST /api/v1/results/consume); absent (no issuer): 404 */
  resultConsumer?: Pick<ResultConsumer, 'consume'>;
  /** Play device recall writes through Google; absent: that route answers 404 */
  deviceRecall?: DeviceRecallWrite;
  /** counts each verify for `attest stats` (in memory; written to the database in the background) */
  stats?: Pick<StatsRecorder, 'record'>;
  /**
   * Whether an app ID or package is allowlisted, read from the allowlist the verifiers use (its
   * cached snapshot: no query, except the reload after a change): the app of a failed verify is
   * counted under its own name only then, else as `other`, in statistics and metrics alike.
   */
  allowlisted?: (app: string) => boolean | Promise<boolean>;
  /** ATTEST_TRUSTED_PROXIES: the client behind a trusted proxy (absent: the TCP peer) */
  clientAddress?: ClientAddress;
}

/** How long verifiers may cache the JWKS and the discovery document. */
export const WELL_KNOWN_MAX_AGE_SECONDS = 300;

const ROUTES: Record<string, string[]> = {
  '/api/v1/attestation/init': ['POST'],
  '/api/v1/attestation/verify': ['POST'],
  '/api/v1/results/consume': ['POST'],
  [DEVICE_RECALL_PATH]: ['POST'],
  '/healthz': ['GET', 'HEAD'],
  '/readyz': ['GET', 'HEAD'],
  '/metrics': ['GET'],
  '/openapi.json': ['GET'],
  [LIVE_JWKS_PATH]: ['GET', 'HEAD'],
  [TEST_JWKS_PATH]: ['GET', 'HEAD'],
  '/.well-known/openid-configuration': ['GET', 'HEAD'],
  '/docs': ['GET'],
};

/** The HTTP API: the contract of docs/http-api.md. No module state. */
export function createApp(deps: AppDeps): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  const deadlineMs = deps.requestDeadlineMs ?? 5000;

  app.use(
    '*',
    requestLog({
      logger: deps.logger,
      metrics: deps.metrics,
      routes: ROUTES,
      telemetry: deps.telemetry,
    }),
  );

  app.onError((err, c) => {
    const log = c.get('log');
    if (log) log.err = describeFault(err);
    const answer = faultAnswer(err);
    if (answer.timeout) deps.onBackendTimeout?.(err);
    deps.writeHealth?.observe(err);
    if (answer.retryAfterSeconds !== undefined)
      c.header('Retry-After', String(answer.retryAfterSeconds));
    // nothing was decided (a busy upstream, no database: a cut statement may have spent its
    // session or counter); a retry may be served, by the new primary after a failover
    if (answer.unavailable) return errorBody(c, 503, STATUS_INTERNAL_ERROR, answer.unavailable);
    return errorBody(c, 500, STATUS_INTERNAL_ERROR, 'Internal error');
  });

  // outside the budget and the key check: a 5xx they answer counts as an error too
  app.use(
    '/api/v1/attestation/verify',
    verifyCounter({ stats: deps.stats, metrics: deps.metrics, allowlisted: deps.allowlisted }),
  );
  // the budget first: the key's database reads count against it; the key is checked before
  // anything else under /api/, unknown paths included
  app.use('/api/*', backendBudget({ deadlineMs, breaker: deps.breaker }));
  app.use(
    '/api/*',
    apiKeyAuth({ auth: deps.auth, testKeys: deps.testKeys, clientAddress: deps.clientAddress }),
  );

  app.post('/api/v1/attestation/init', async (c) => {
    const serverNonce = randomBytes(32);
    const reference = `ses_${randomBytes(24).toString('base64url')}`;
    const { expiresAt } = await c.get('backend')(() =>
      deps.sessions.create({
        reference,
        apiKeyId: c.get('keyId'),
        serverNonce,
        ttlSeconds: deps.sessionTtlSeconds,
      }),
    );
    deps.metrics.sessionCreated();
    return c.json({
      sessionReference: reference,
      serverNonce: encodeBase64(serverNonce),
      expiresAtUtc: expiresAt.toISOString(),
      statusCode: STATUS_OK,
    });
  });

  app.post('/api/v1/attestation/verify', async (c) => {
    const log = c.get('log');
    const read = await readJson(c, BODY_LIMIT_BYTES, 413);
    if (!read.ok) return read.response;
    const parsed = parseVerifyRequest(read.json);
    if (!parsed.ok) return errorBody(c, 400, STATUS_INVALID_REQUEST, parsed.message);
    const request = parsed.request;
    log.approach = request.approach;

    let nonce: Uint8Array;
    if (request.approach === 'session') {
      const consumed = await c.get('backend')(() =>
        deps.sessions.consume(request.sessionReference, c.get('keyId')),
      );
      if (!consumed.ok) {
        log.service = peekService(request.token);
        return rejected(c, consumed.reason, sessionDetail[consumed.reason], undefined);
      }
      nonce = finalNonce(consumed.serverNonce, request.deviceNonce);
    } else {
      nonce = request.expectedNonce;
    }

    // a scoped key's verification refuses tokens of other apps (app_not_in_key_scope)
    const appScope = c.get('apps');
    const outcome = await c.get('backend')(() =>
      deps.verify(
        { token: request.token, expectedNonce: nonce, ...(appScope ? { appScope } : {}) },
        c.get('mode'),
        c.get('keyId'),
      ),
    );
    Object.assign(log, pickFacts(outcome.facts));
    // a missing or invalid receipt is logged (receiptProblem) and counted, whatever the verdict
    if (outcome.facts.receipt) deps.metrics.observeReceipt(outcome.facts.receipt);
    if (!outcome.ok) return rejected(c, outcome.reason, outcome.detail, outcome.facts.remediation);
    log.isValid = true;
    // observed rules that failed: in the log line (and so the statistics), never in the response
    if (outcome.observed) log.observed = outcome.observed;
    deps.metrics.observeVerify(outcome.details.service, true, 'none', c.get('mode'));
    const { service, ...details } = outcome.details;
    if (!c.get('resultTokens')) return c.json({ isValid: true, statusCode: STATUS_OK, ...details });
    // a test-mode key's token is signed by a test key only: never one a live verifier trusts
    const signer = c.get('mode') === 'test' ? deps.testResultTokens : deps.resultTokens;
    if (!signer)
      throw new Error(
        'this API key has result tokens on, but ATTEST_ISSUER is unset: set it and restart, or turn them off (attest keys update ID --result-tokens off)',
      );
    const resultToken = await c.get('backend')(
      signer.sign({
        apiKeyId: c.get('keyId'),
        approach: request.approach,
        nonce,
        details: outcome.details,
        devicePublicKey: outcome.facts.devicePublicKey,
      }),
    );
    return c.json({ isValid: true, statusCode: STATUS_OK, ...details, resultToken });
  });

  // a payment or ledger service accepts a result once: the first consume of a token says so
  app.post('/api/v1/results/consume', async (c) => {
    const consumer = deps.resultConsumer;
    if (!consumer) return errorBody(c, 404, STATUS_INVALID_REQUEST, 'Not found');
    const log = c.get('log');
    // the contract answers a body too large as any malformed body: 400
    const read = await readJson(c, CONSUME_BODY_LIMIT_BYTES, 400);
    if (!read.ok) return read.response;
    const parsed = parseConsumeRequest(read.json);
    if (!parsed.ok) return errorBody(c, 400, STATUS_INVALID_REQUEST, parsed.message);
    const outcome = await c.get('backend')(() =>
      consumer.consume(parsed.resultToken, {
        id: c.get('keyId'),
        mode: c.get('mode'),
        apps: c.get('apps'),
      }),
    );
    log.isValid = outcome.valid;
    if (!outcome.valid) {
      // why stays in the log: a forger learns nothing from the answer
      log.reason = outcome.reason;
      log.detail = outcome.detail;
      deps.metrics.observeConsume('invalid', outcome.reason, c.get('mode'));
      return c.json({ valid: false });
    }
    deps.metrics.observeConsume(outcome.alreadyConsumed ? 'again' : 'first', 'none', c.get('mode'));
    log.service = outcome.claims.service;
    log.jti = outcome.claims.jti;
    log.alreadyConsumed = outcome.alreadyConsumed;
    return c.json({
      valid: true,
      alreadyConsumed: outcome.alreadyConsumed,
      claims: outcome.claims,
    });
  });
  app.post(DEVICE_RECALL_PATH, (c) => deviceRecallHandler(c, deps.deviceRecall));

  // what verifiers of result tokens fetch: no API key, cacheable
  app.get(LIVE_JWKS_PATH, async (c) => {
    if (!deps.resultTokens) return errorBody(c, 404, STATUS_INVALID_REQUEST, 'Not found');
    const jwks = await deps.resultTokens.jwks();
    c.header('Cache-Control', `max-age=${WELL_KNOWN_MAX_AGE_SECONDS}`);
    return c.json(jwks);
  });
  app.get(TEST_JWKS_PATH, async (c) => {
    if (!deps.testResultTokens) return errorBody(c, 404, STATUS_INVALID_REQUEST, 'Not found');
    const jwks = await deps.testResultTokens.jwks();
    c.header('Cache-Control', `max-age=${WELL_KNOWN_MAX_AGE_SECONDS}`);
    return c.json(jwks);
  });
  app.get('/.well-known/openid-configuration', (c) => {
    if (!deps.resultTokens) return errorBody(c, 404, STATUS_INVALID_REQUEST, 'Not found');
    c.header('Cache-Control', `max-age=${WELL_KNOWN_MAX_AGE_SECONDS}`);
    return c.json({
      issuer: deps.resultTokens.issuer,
      jwks_uri: `${deps.resultTokens.issuer}${LIVE_JWKS_PATH}`,
      // not OpenID's: where the keys of test-mode tokens are, for test environments that opt in
      ...(deps.testResultTokens
        ? { attest_test_jwks_uri: `${deps.resultTokens.issuer}${TEST_JWKS_PATH}` }
        : {}),
    });
  });

  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  app.get('/readyz', async (c) => {
    const ready = await readiness();
    return c.json({ status: ready ? 'ready' : 'not ready' }, ready ? 200 : 503);
  });
  /**
   * false at once while the breaker is open; false while writes are refused (a full disk, a
   * read-only database: a probe write decides); else the database's answer, bounded by the deadline
   */
  async function readiness(): Promise<boolean> {
    const breaker = deps.breaker;
    if (breaker?.isOpen()) return false;
    if (deps.writeHealth) {
      // its statements and the ready check's are bounded like a request's (wireApp.ts)
      const writable = await deps.writeHealth.writable().catch((err: unknown) => {
        breaker?.failed(err);
        return false;
      });
      if (!writable) return false;
    }
    let timer: NodeJS.Timeout | undefined;
    let suspect: NodeJS.Timeout | undefined;
    let unsubscribe: (() => void) | undefined;
    try {
      return await Promise.race([
        deps.ready().catch((err: unknown) => {
          if (isDatabaseTimeout(err)) breaker?.suspect();
          breaker?.failed(err);
          return false;
        }),
        new Promise<boolean>((resolve) => {
          timer = setTimeout(resolve, deadlineMs, false);
          unsubscribe = breaker?.onOpen(() => resolve(false));
          // a database that hangs: the breaker's probe decides sooner than the deadline
          if (breaker) suspect = setTimeout(() => breaker.suspect(), SUSPECT_AFTER_MS);
        }),
      ]);
    } finally {
      clearTimeout(timer);
      clearTimeout(suspect);
      unsubscribe?.();
    }
  }
  const metricsRoute = deps.metricsRoute ?? true;
  if (metricsRoute) {
    app.get('/metrics', async (c) => {
      const text = await (deps.scrape ? deps.scrape() : deps.metrics.registry.metrics());
      return c.text(text, 200, { 'Content-Type': METRICS_CONTENT_TYPE });
    });
  }
  app.get('/openapi.json', (c) => c.json(OPENAPI_DOCUMENT));
  const apiDocs = createApiDocs();
  app.get('/docs', (c) => apiDocs.page(c));
  // the page's asset links are relative to /docs: the trailing-slash form redirects there
  app.get('/docs/', (c) => c.redirect('/docs', 301));
  app.get('/docs/:asset', (c) => apiDocs.asset(c, c.req.param('asset')) ?? c.notFound());

  app.notFound((c) => {
    const allowed = c.req.path === '/metrics' && !metricsRoute ? undefined : ROUTES[c.req.path];
    if (allowed) {
      c.header('Allow', allowed.join(', '));
      return errorBody(c, 405, STATUS_INVALID_REQUEST, 'Method not allowed');
    }
    return errorBody(c, 404, STATUS_INVALID_REQUEST, 'Not found');
  });

  function rejected(
    c: Context<AppEnv>,
    reason: RejectReason,
    detail: string,
    remediation: RemediationDialog | undefined,
  ) {
    const log = c.get('log');
    log.isValid = false;
    log.reason = reason;
    log.detail = detail;
    deps.metrics.observeVerify(log.service ?? 'unknown', false, reason, c.get('mode'));
    // the contract's body for every key; the reason only for keys that asked for it
    if (!c.get('rejectionDetails')) return c.json({ isValid: false, statusCode: STATUS_OK });
    const rejection = { reason, ...(remediation ? { remediation } : {}) };
    return c.json({ isValid: false, statusCode: STATUS_OK, rejection });
  }

  return app;
}

const sessionDetail: Record<'session_unknown' | 'session_consumed' | 'session_expired', string> = {
  session_unknown: 'no session with this reference for this API key',
  session_consumed: 'the session was already used',
  session_expired: 'the session expired before verify',
};

/** The token's platform for logs and metrics when the session fails before verification. */
function peekService(token: Uint8Array): string | undefined {
  try {
    const { service } = parseEnvelope(token);
    return isService(service) ? service : undefined;
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
  if (facts.receipt) out.receipt = facts.receipt;
  if (facts.receiptProblem) out.receiptProblem = facts.receiptProblem;
  return out;
}

/**
 * What a fault may say in the log. drizzle's messages embed the query parameters (session
 * references, keys), so only the driver's own error code and message are kept.
 */
export function describeFault(err: unknown): { type: string; code?: string; message: string } {
  const e = err as {
    name?: string;
    message?: string;
    code?: unknown;
    cause?: { code?: string; message?: string };
  };
  const cause = e?.cause;
  if (cause && typeof cause === 'object') {
    return {
      type: truncate(String(e.name ?? 'Error'), 64),
      ...(cause.code ? { code: truncate(String(cause.code), 64) } : {}),
      message: truncate(String(cause.message ?? ''), 300),
    };
  }
  const message = String(e?.message ?? err);
  return {
    type: truncate(String(e?.name ?? 'Error'), 64),
    ...(typeof e?.code === 'string' ? { code: truncate(e.code, 64) } : {}),
    message: /failed query|params:/i.test(message)
      ? 'database query failed'
      : truncate(message, 300),
  };
}
