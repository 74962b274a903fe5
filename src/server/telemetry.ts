import { randomUUID } from 'node:crypto';
import {
  defaultTextMapGetter,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  type Attributes,
  type Counter,
  type Histogram,
  type Tracer,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import type { OtelConfig } from '../otelConfig.js';
import type { RequestLog } from './appEnv.js';
import { errorType, HTTP_DURATION_BUCKETS } from './httpSemconv.js';

/** One finished request as telemetry sees it: the request log's facts, never a token byte. */
export interface TracedRequest {
  log: Readonly<RequestLog>;
  status: number;
  /** epoch milliseconds */
  startedAt: number;
  endedAt: number;
  /** the incoming W3C trace context headers, to continue the caller's trace */
  traceparent?: string | undefined;
  tracestate?: string | undefined;
}

/** OTLP export of the stable HTTP server metrics, attest's verification counts, and a span per API request. */
export interface Telemetry {
  recordRequest(method: string, route: string, status: number, seconds: number): void;
  recordVerification(
    service: string,
    app: string,
    outcome: string,
    reason: string,
    mode?: string,
  ): void;
  /** a SERVER span for an /api/ request, with its outcome and reason */
  traceRequest(request: TracedRequest): void;
  /** exports what is pending, then stops (at shutdown) */
  shutdown(): Promise<void>;
}

const propagator = new W3CTraceContextPropagator();

/**
 * The OpenTelemetry SDK's meter and tracer providers with OTLP/HTTP JSON exporters, as `config`
 * says (config.ts reads the OTEL_* variables). Instruments record into the SDK's in-memory
 * aggregation; exports run in the background on the SDK's timers.
 */
export function createTelemetry(config: OtelConfig, version: string): Telemetry {
  const resource = resourceFromAttributes({
    'service.name': config.serviceName,
    'service.version': version,
    // one per process: the workers of `serve --workers` each export their own series
    'service.instance.id': randomUUID(),
  });
  let meters: MeterProvider | undefined;
  let duration: Histogram | undefined;
  let verifications: Counter | undefined;
  if (config.metricsUrl) {
    meters = new MeterProvider({
      resource,
      readers: [
        new PeriodicExportingMetricReader({
          exporter: new OTLPMetricExporter({ url: config.metricsUrl, headers: config.headers }),
          exportIntervalMillis: config.exportIntervalMs,
          exportTimeoutMillis: Math.min(config.exportIntervalMs, 30_000),
        }),
      ],
    });
    const meter = meters.getMeter('attest', version);
    duration = meter.createHistogram('http.server.request.duration', {
      unit: 's',
      description: 'Duration of HTTP server requests.',
      advice: { explicitBucketBoundaries: HTTP_DURATION_BUCKETS },
    });
    verifications = meter.createCounter('attest.verifications', {
      unit: '{verification}',
      description:
        'verify outcomes by platform, app (allowlisted ids only, else other), outcome (valid, rejected, observed, error) and reason',
    });
  }
  let tracers: TracerProvider | undefined;
  let tracer: Tracer | undefined;
  if (config.tracesUrl) {
    tracers = new TracerProvider({
      resource,
      spanProcessors: [
        new BatchSpanProcessor({
          exporter: new OTLPTraceExporter({ url: config.tracesUrl, headers: config.headers }),
        }),
      ],
    });
    tracer = tracers.getTracer('attest', version);
  }
  return {
    recordRequest(method, route, status, seconds) {
      const type = errorType(status);
      duration?.record(seconds, {
        'http.request.method': method,
        'http.route': route,
        'http.response.status_code': status,
        'url.scheme': 'http',
        ...(type ? { 'error.type': type } : {}),
      });
    },
    recordVerification(service, app, outcome, reason, mode = 'live') {
      verifications?.add(1, {
        'attest.service': service || 'unknown',
        'attest.app': app || 'unknown',
        'attest.outcome': outcome,
        'attest.reason': reason || 'none',
        'attest.mode': mode || 'unknown',
      });
    },
    traceRequest({ log, status, startedAt, endedAt, traceparent, tracestate }) {
      if (!tracer) return;
      const parent = traceparent
        ? propagator.extract(
            ROOT_CONTEXT,
            { traceparent, ...(tracestate ? { tracestate } : {}) },
            defaultTextMapGetter,
          )
        : ROOT_CONTEXT;
      const type = errorType(status);
      const attributes: Attributes = {
        'http.request.method': log.method,
        'http.route': log.route,
        'http.response.status_code': status,
        'url.scheme': 'http',
        'attest.request_id': log.requestId,
        ...(type ? { 'error.type': type } : {}),
        ...(log.mode ? { 'attest.key_mode': log.mode } : {}),
        ...(log.apiKeyId ? { 'attest.api_key_id': log.apiKeyId } : {}),
        ...(log.approach ? { 'attest.approach': log.approach } : {}),
        ...(log.service ? { 'attest.service': log.service } : {}),
        ...(log.isValid !== undefined
          ? { 'attest.outcome': log.isValid ? 'valid' : 'rejected' }
          : {}),
        ...(log.reason ? { 'attest.reason': log.reason } : {}),
        ...(log.observed?.length ? { 'attest.observed': log.observed } : {}),
      };
      const span = tracer.startSpan(
        `${log.method} ${log.route}`,
        { kind: SpanKind.SERVER, startTime: startedAt, attributes },
        parent,
      );
      if (type) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end(endedAt);
    },
    async shutdown() {
      await Promise.allSettled([meters?.shutdown(), tracers?.shutdown()]);
    },
  };
}
