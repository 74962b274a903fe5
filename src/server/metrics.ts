import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** How long a scrape waits for the session counts (the gauge keeps its last values after that). */
const SESSION_COUNTS_TIMEOUT_MS = 1000;

/** Prometheus metrics of one app instance (own registry: no global state). */
export function createMetrics(options: { sessionCounts?: () => Promise<{ active: number; consumed: number; expired: number }> } = {}) {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'attest_' });
  const requests = new Counter({
    name: 'attest_http_requests_total',
    help: 'HTTP requests by route, method and status',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'attest_http_request_duration_seconds',
    help: 'HTTP request latency by route',
    labelNames: ['route'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });
  const verifications = new Counter({
    name: 'attest_verify_total',
    help: 'verify outcomes by platform, validity and rejection reason',
    labelNames: ['service', 'valid', 'reason'] as const,
    registers: [registry],
  });
  const google = new Counter({
    name: 'attest_google_requests_total',
    help: 'exchanges with Google for standard Play Integrity requests, by endpoint and outcome (faults by cause)',
    labelNames: ['endpoint', 'outcome'] as const,
    registers: [registry],
  });
  const sessionsCreated = new Counter({ name: 'attest_sessions_created_total', help: 'sessions created by init', registers: [registry] });
  if (options.sessionCounts) {
    const read = options.sessionCounts;
    new Gauge({
      name: 'attest_sessions',
      help: 'stored sessions by state (read from the database at scrape time)',
      labelNames: ['state'] as const,
      registers: [registry],
      async collect() {
        // a hanging database must not hang the scrape: the request counters matter most then
        const counts = await Promise.race([
          read().catch(() => null),
          new Promise<null>((resolve) => setTimeout(resolve, SESSION_COUNTS_TIMEOUT_MS, null).unref()),
        ]);
        if (!counts) return;
        for (const [state, n] of Object.entries(counts)) this.set({ state }, n);
      },
    });
  }
  return {
    registry,
    observeRequest(route: string, method: string, status: number, seconds: number) {
      requests.inc({ route, method, status: String(status) });
      duration.observe({ route }, seconds);
    },
    observeVerify(service: string, valid: boolean, reason: string) {
      verifications.inc({ service, valid: String(valid), reason });
    },
    observeGoogle(endpoint: string, outcome: string) {
      google.inc({ endpoint, outcome });
    },
    sessionCreated() {
      sessionsCreated.inc();
    },
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
