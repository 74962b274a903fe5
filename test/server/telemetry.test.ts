/**
 * OpenTelemetry: with the standard OTEL_* variables set, a running server exports the stable HTTP
 * server metric, its verification counts and a span per API request to a local OTLP/HTTP JSON
 * receiver; never a token byte. Without them nothing is sent and /metrics carries the same
 * HTTP metric under the Prometheus names.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { startServer, type RunningServer } from '../../src/server/start.js';
import { HTTP_DURATION_BUCKETS } from '../../src/server/httpSemconv.js';
import { captureLogger, issueKey } from '../support/service.js';
import { it } from '../support/fixtures.js';

interface Received {
  path: string;
  body: string;
}

/** An OTLP/HTTP receiver: keeps every request's path and JSON body. */
async function startReceiver(): Promise<{ url: string; received: Received[]; server: Server }> {
  const received: Received[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      received.push({ path: req.url ?? '', body });
      res.writeHead(200, { 'Content-Type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, received, server };
}

type AnyValue = { stringValue?: string; intValue?: string | number; arrayValue?: unknown };
type KeyValue = { key: string; value: AnyValue };
const attrs = (list: KeyValue[] = []) =>
  Object.fromEntries(
    list.map((a) => [
      a.key,
      a.value.stringValue ??
        (a.value.intValue !== undefined ? Number(a.value.intValue) : a.value.arrayValue),
    ]),
  );

interface OtlpMetric {
  name: string;
  unit?: string;
  histogram?: {
    dataPoints: { attributes: KeyValue[]; explicitBounds: number[]; count: string | number }[];
  };
  sum?: { dataPoints: { attributes: KeyValue[]; asInt?: string | number; asDouble?: number }[] };
}
interface OtlpSpan {
  name: string;
  kind: number;
  traceId: string;
  parentSpanId?: string;
  attributes: KeyValue[];
}

function metricsOf(received: Received[]): OtlpMetric[] {
  return received
    .filter((r) => r.path === '/v1/metrics')
    .flatMap((r) =>
      (
        JSON.parse(r.body) as {
          resourceMetrics: { scopeMetrics: { metrics: OtlpMetric[] }[] }[];
        }
      ).resourceMetrics.flatMap((rm) => rm.scopeMetrics.flatMap((sm) => sm.metrics)),
    );
}

function spansOf(received: Received[]): OtlpSpan[] {
  return received
    .filter((r) => r.path === '/v1/traces')
    .flatMap((r) =>
      (
        JSON.parse(r.body) as { resourceSpans: { scopeSpans: { spans: OtlpSpan[] }[] }[] }
      ).resourceSpans.flatMap((rs) => rs.scopeSpans.flatMap((ss) => ss.spans)),
    );
}

describe('OpenTelemetry export', { timeout: 120_000 }, () => {
  let data: string;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let server: RunningServer | undefined;

  // the data dir's migration is in this hook: as long as the tests' own time
  it.beforeAll(async ({ dataDir }) => {
    data = dataDir.path;
    receiver = await startReceiver();
  }, 120_000);
  afterAll(async () => {
    await server?.close();
    receiver?.server.close();
  });

  it('exports http.server.request.duration, attest.verifications and a span per API request, with no token bytes', async () => {
    const config = loadConfig(
      { port: 0, host: '127.0.0.1' },
      {
        ATTEST_DATA_DIR: data,
        ATTEST_ANDROID_REVOCATION_URL: 'off',
        OTEL_EXPORTER_OTLP_ENDPOINT: `${receiver.url}/`,
        OTEL_SERVICE_NAME: 'attest-under-test',
        OTEL_METRIC_EXPORT_INTERVAL: '60000',
      },
    );
    const { logger } = captureLogger();
    server = await startServer(config, logger, { migrate: false });
    const key = await issueKey(server.database);
    // a token no verifier accepts: the answer is a rejection with a reason
    const token = randomBytes(96).toString('base64');
    const traceId = randomBytes(16).toString('hex');
    const verify = await fetch(`${server.url}/api/v1/attestation/verify`, {
      method: 'POST',
      headers: {
        'X-Api-Key': key.key,
        'Content-Type': 'application/json',
        traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01`,
      },
      body: JSON.stringify({
        attestationToken: token,
        expectedNonce: randomBytes(32).toString('base64'),
      }),
    });
    expect(await verify.json()).toEqual({ isValid: false, statusCode: 0 });
    const init = await fetch(`${server.url}/api/v1/attestation/init`, {
      method: 'POST',
      headers: { 'X-Api-Key': key.key },
    });
    expect(init.status).toBe(200);
    // close flushes both exporters
    await server.close();
    server = undefined;

    const metrics = metricsOf(receiver.received);
    const duration = metrics.find((m) => m.name === 'http.server.request.duration')!;
    expect(duration.unit).toBe('s');
    const verifyPoint = duration.histogram!.dataPoints.find(
      (p) => attrs(p.attributes)['http.route'] === '/api/v1/attestation/verify',
    )!;
    expect(attrs(verifyPoint.attributes)).toEqual({
      'http.request.method': 'POST',
      'http.route': '/api/v1/attestation/verify',
      'http.response.status_code': 200,
      'url.scheme': 'http',
    });
    expect(verifyPoint.explicitBounds).toEqual(HTTP_DURATION_BUCKETS);
    expect(Number(verifyPoint.count)).toBe(1);
    const counted = metrics.find((m) => m.name === 'attest.verifications')!;
    expect(
      counted.sum!.dataPoints.map((p) => [attrs(p.attributes), Number(p.asDouble ?? p.asInt)]),
    ).toEqual([
      [
        {
          'attest.service': 'unknown',
          'attest.app': 'unknown',
          'attest.outcome': 'rejected',
          'attest.reason': expect.stringMatching(/^[a-z_]+$/),
          'attest.mode': 'live',
        },
        1,
      ],
    ]);

    const spans = spansOf(receiver.received);
    const span = spans.find((s) => s.name === 'POST /api/v1/attestation/verify')!;
    expect(span.kind).toBe(2); // SERVER
    expect(span.traceId).toBe(traceId); // the caller's trace continues
    expect(attrs(span.attributes)).toMatchObject({
      'http.request.method': 'POST',
      'http.route': '/api/v1/attestation/verify',
      'http.response.status_code': 200,
      'attest.outcome': 'rejected',
      'attest.reason': expect.stringMatching(/^[a-z_]+$/),
      'attest.approach': 'sessionless',
    });
    expect(spans.map((s) => s.name)).toContain('POST /api/v1/attestation/init');
    const everything = receiver.received.map((r) => r.body).join('\n');
    expect(everything).toContain('attest-under-test');
    expect(everything).not.toContain(token.slice(0, 24));
    expect(everything).not.toContain(key.key);
  });

  it('without OTEL_* variables nothing is sent, and /metrics has the HTTP metric under its Prometheus name', async () => {
    const before = receiver.received.length;
    const config = loadConfig(
      { port: 0, host: '127.0.0.1' },
      { ATTEST_DATA_DIR: data, ATTEST_ANDROID_REVOCATION_URL: 'off' },
    );
    expect(config.otel).toBeUndefined();
    const { logger } = captureLogger();
    server = await startServer(config, logger, { migrate: false });
    await fetch(`${server.url}/healthz`);
    const text = await (await fetch(`${server.url}/metrics`)).text();
    expect(text).toMatch(
      /http_server_request_duration_seconds_count\{http_request_method="GET",http_route="\/healthz",http_response_status_code="200",error_type=""\} 1/,
    );
    expect(text).toContain('http_server_request_duration_seconds_bucket{le="0.075"');
    expect(text).toMatch(/# HELP attest_http_requests_total deprecated/);
    await server.close();
    server = undefined;
    expect(receiver.received.length).toBe(before);
  });
});

describe('OTEL_* configuration', () => {
  const env = { ATTEST_DATA_DIR: '/tmp/x' };
  it('a base endpoint gets the signal paths; a signal endpoint is used as given; none turns a signal off', () => {
    expect(loadConfig({}, { ...env, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }).otel).toEqual({
      metricsUrl: 'http://c:4318/v1/metrics',
      tracesUrl: 'http://c:4318/v1/traces',
      headers: {},
      serviceName: 'attest',
      exportIntervalMs: 60_000,
    });
    expect(
      loadConfig(
        {},
        {
          ...env,
          OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://t.example/otlp',
          OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20abc, x-tenant = 7',
        },
      ).otel,
    ).toEqual({
      tracesUrl: 'https://t.example/otlp',
      headers: { authorization: 'Bearer abc', 'x-tenant': '7' },
      serviceName: 'attest',
      exportIntervalMs: 60_000,
    });
    expect(
      loadConfig(
        {},
        { ...env, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' },
      ).otel,
    ).toMatchObject({ metricsUrl: 'http://c:4318/v1/metrics' });
    expect(
      loadConfig(
        {},
        { ...env, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' },
      ).otel,
    ).toBeUndefined();
    expect(loadConfig({}, env).otel).toBeUndefined();
  });

  it('a protocol other than http/json, or a malformed endpoint, is one clear error (the header value never shown)', () => {
    expect(() => loadConfig({}, { ...env, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toThrow(
      /OTEL_EXPORTER_OTLP_PROTOCOL must be http\/json/,
    );
    expect(() => loadConfig({}, { ...env, OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' })).toThrow(
      /OTEL_EXPORTER_OTLP_ENDPOINT must be an http\(s\) URL/,
    );
    let message = '';
    try {
      loadConfig({}, { ...env, OTEL_EXPORTER_OTLP_HEADERS: 'secret-token-without-a-key' });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/OTEL_EXPORTER_OTLP_HEADERS must be key=value pairs/);
    expect(message).not.toContain('secret-token');
  });
});
