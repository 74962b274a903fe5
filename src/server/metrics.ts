import { Hono } from 'hono';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { errorType, HTTP_DURATION_BUCKETS } from './httpSemconv.js';
import type { Telemetry } from './telemetry.js';

/** How long the first scrape waits for the session counts (later ones answer the last values at once). */
const SESSION_COUNTS_TIMEOUT_MS = 1000;

type SessionCounts = { active: number; consumed: number; expired: number };

export interface MetricsOptions {
  sessionCounts?: () => Promise<SessionCounts>;
  /** the counts are re-read at most this often, one query at a time, whatever the number of scrapers */
  sessionCountsMaxAgeMs?: number;
  now?: () => number;
  /** when the Android attestation status list in use was taken (null: none known) */
  androidRevocationTakenAt?: () => Date | null;
  /** whether the database breaker is open (requests fail at once until a probe answers) */
  databaseBreakerOpen?: () => boolean;
  /** OTLP export (OTEL_* variables): each request and verification is recorded there too */
  telemetry?: Telemetry | undefined;
}

/** Prometheus metrics of one app instance (own registry: no global state). */
export function createMetrics(options: MetricsOptions = {}) {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'attest_' });
  const telemetry = options.telemetry;
  // OpenTelemetry's stable HTTP server metric, as its Prometheus exporter names it: its _count
  // replaces attest_http_requests_total, and it replaces attest_http_request_duration_seconds
  const httpDuration = new Histogram({
    name: 'http_server_request_duration_seconds',
    help: 'Duration of HTTP server requests (OpenTelemetry http.server.request.duration)',
    labelNames: [
      'http_request_method',
      'http_route',
      'http_response_status_code',
      'error_type',
    ] as const,
    buckets: HTTP_DURATION_BUCKETS,
    registers: [registry],
  });
  const requests = new Counter({
    name: 'attest_http_requests_total',
    help: 'deprecated, removed in the next release: http_server_request_duration_seconds_count. HTTP requests by route, method and status',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'attest_http_request_duration_seconds',
    help: 'deprecated, removed in the next release: http_server_request_duration_seconds. HTTP request latency by route',
    labelNames: ['route'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });
  const verifications = new Counter({
    name: 'attest_verify_total',
    help: 'verify outcomes by platform, validity, rejection reason and API key mode',
    labelNames: ['service', 'valid', 'reason', 'mode'] as const,
    registers: [registry],
  });
  const consumes = new Counter({
    name: 'attest_result_consume_total',
    help: 'result token consumes by outcome (first, again: already consumed, invalid), rejection reason and API key mode',
    labelNames: ['outcome', 'reason', 'mode'] as const,
    registers: [registry],
  });
  const outcomes = new Counter({
    name: 'attest_verifications_total',
    help: 'verify outcomes by platform, app, outcome (valid, rejected, observed, error), reason and API key mode (live, test; unknown when the key was not known). app: the App Attest app ID or Android package the evidence names when it is allowlisted; other when the evidence names one that is not; unknown when the verify failed before its evidence named one (an unreadable token, a session that was unknown, used or expired, an App Attest nonce or chain failure before its app ID hash is matched)',
    labelNames: ['service', 'app', 'outcome', 'reason', 'mode'] as const,
    registers: [registry],
  });
  const google = new Counter({
    name: 'attest_google_requests_total',
    help: 'exchanges with Google for standard Play Integrity requests (token, decode) and device recall writes (recall), by endpoint and outcome (faults by cause)',
    labelNames: ['endpoint', 'outcome'] as const,
    registers: [registry],
  });
  const receipts = new Counter({
    name: 'attest_apple_receipts_total',
    help: 'App Attest registrations by what their receipt was: valid, missing or invalid (an invalid one rejects only under --require-receipt)',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  const refreshes = new Counter({
    name: 'attest_apple_receipt_refresh_total',
    help: "receipt refreshes at Apple's App Attest data endpoint by outcome (refreshed, not_modified, not_found, unauthorized, rate_limited, server_error, invalid, network_error)",
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  const riskMetrics = new Histogram({
    name: 'attest_apple_risk_metric',
    help: "Apple's risk metric of each refreshed receipt (attestations for the device and app over 30 days)",
    buckets: [1, 2, 3, 5, 10, 20, 50, 100],
    registers: [registry],
  });
  const sessionsCreated = new Counter({
    name: 'attest_sessions_created_total',
    help: 'sessions created by init',
    registers: [registry],
  });
  if (options.sessionCounts) {
    const read = options.sessionCounts;
    const now = options.now ?? Date.now;
    const maxAgeMs = options.sessionCountsMaxAgeMs ?? 30_000;
    let last: SessionCounts | null = null;
    let attemptedAt = -Infinity;
    let refreshing: Promise<void> | null = null;
    // a count(*) over the sessions table per scrape was the cost: one read per maxAgeMs at most
    const refresh = (): Promise<void> | null => {
      if (refreshing || now() - attemptedAt < maxAgeMs) return refreshing;
      attemptedAt = now();
      let timer: NodeJS.Timeout | undefined;
      // a read that never answers must not stop every later refresh
      const giveUp = new Promise<void>(
        (resolve) =>
          (timer = setTimeout(resolve, Math.max(maxAgeMs, SESSION_COUNTS_TIMEOUT_MS)).unref()),
      );
      const done = read().then(
        (counts) => {
          last = counts;
        },
        () => {},
      );
      refreshing = Promise.race([done, giveUp]).finally(() => {
        clearTimeout(timer);
        refreshing = null;
      });
      return refreshing;
    };
    new Gauge({
      name: 'attest_sessions',
      help: `stored sessions by state (read from the database at most every ${Math.round(maxAgeMs / 1000)} s)`,
      labelNames: ['state'] as const,
      registers: [registry],
      async collect() {
        const pending = refresh();
        // only a first scrape waits, and not for long: a hanging database must not hang scrapes
        if (!last && pending) {
          await Promise.race([
            pending,
            new Promise<void>((resolve) => setTimeout(resolve, SESSION_COUNTS_TIMEOUT_MS).unref()),
          ]);
        }
        if (!last) return;
        for (const [state, n] of Object.entries(last)) this.set({ state }, n);
      },
    });
  }
  if (options.androidRevocationTakenAt) {
    const takenAt = options.androidRevocationTakenAt;
    const now = options.now ?? Date.now;
    new Gauge({
      name: 'attest_android_revocation_age_seconds',
      help: 'age of the Android attestation status list in use (since Google published it)',
      registers: [registry],
      collect() {
        const at = takenAt();
        if (at) this.set(Math.max(0, Math.round((now() - at.getTime()) / 1000)));
      },
    });
  }
  if (options.databaseBreakerOpen) {
    const isOpen = options.databaseBreakerOpen;
    new Gauge({
      name: 'attest_database_breaker_open',
      help: '1 while the database cannot be reached and requests fail at once, else 0 (serve --workers: the number of workers whose breaker is open)',
      registers: [registry],
      collect() {
        this.set(isOpen() ? 1 : 0);
      },
    });
  }
  return {
    registry,
    observeRequest(route: string, method: string, status: number, seconds: number) {
      requests.inc({ route, method, status: String(status) });
      duration.observe({ route }, seconds);
      httpDuration.observe(
        {
          http_request_method: method,
          http_route: route,
          http_response_status_code: String(status),
          error_type: errorType(status) ?? '',
        },
        seconds,
      );
      telemetry?.recordRequest(method, route, status, seconds);
    },
    observeVerify(service: string, valid: boolean, reason: string, mode = 'live') {
      verifications.inc({ service, valid: String(valid), reason, mode });
    },
    /** a consume: `first` the one answer alreadyConsumed false, `again` a replay, `invalid` valid false */
    observeConsume(outcome: 'first' | 'again' | 'invalid', reason: string, mode: string) {
      consumes.inc({ outcome, reason, mode });
    },
    /**
     * One outcome of a verify. `app` must already be bounded (an allowlisted id, `other`, or ''
     * when unknown): a label per client-chosen value would grow the series without limit.
     */
    observeVerification(
      service: string,
      app: string,
      outcome: string,
      reason: string,
      mode: '' | 'live' | 'test' = 'live',
    ) {
      outcomes.inc({
        service: service || 'unknown',
        app: app || 'unknown',
        outcome,
        reason: reason || 'none',
        mode: mode || 'unknown',
      });
      telemetry?.recordVerification(service, app, outcome, reason, mode);
    },
    observeGoogle(endpoint: string, outcome: string) {
      google.inc({ endpoint, outcome });
    },
    observeReceipt(outcome: 'valid' | 'missing' | 'invalid') {
      receipts.inc({ outcome });
    },
    observeReceiptRefresh(outcome: string, riskMetric: number | null = null) {
      refreshes.inc({ outcome });
      if (riskMetric !== null) riskMetrics.observe(riskMetric);
    },
    sessionCreated() {
      sessionsCreated.inc();
    },
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

/** The Content-Type of a scrape (Prometheus text format 0.0.4). */
export const METRICS_CONTENT_TYPE = Registry.PROMETHEUS_CONTENT_TYPE;

/**
 * `/metrics` alone, for a listener of its own (ATTEST_METRICS_PORT), apart from the API.
 * @param scrape - the text it answers: one process's registry, or a cluster's sum
 */
export function createMetricsApp(scrape: () => Promise<string>): Hono {
  const app = new Hono();
  app.get('/metrics', async (c) =>
    c.text(await scrape(), 200, { 'Content-Type': METRICS_CONTENT_TYPE }),
  );
  app.notFound((c) => c.text('Not found: this port serves GET /metrics only\n', 404));
  return app;
}
