/**
 * The OpenTelemetry part of the configuration: what the standard OTEL_* variables (checked by
 * config.ts's schema) say about where metrics and traces go.
 */

/** Where and how OTLP metrics and traces go (docs/operations.md, "OpenTelemetry"). */
export interface OtelConfig {
  /** OTLP/HTTP JSON endpoint of metrics; absent: no metric export */
  metricsUrl?: string;
  /** OTLP/HTTP JSON endpoint of traces; absent: no span export */
  tracesUrl?: string;
  /** OTEL_EXPORTER_OTLP_HEADERS (secret: may hold a token; never log it) */
  headers: Record<string, string>;
  serviceName: string;
  /** OTEL_METRIC_EXPORT_INTERVAL */
  exportIntervalMs: number;
}

/** The OTEL_* variables as config.ts's schema parsed them. */
export interface OtelVariables {
  OTEL_SDK_DISABLED: 'true' | 'false';
  OTEL_EXPORTER_OTLP_ENDPOINT?: string | undefined;
  OTEL_EXPORTER_OTLP_METRICS_ENDPOINT?: string | undefined;
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?: string | undefined;
  OTEL_EXPORTER_OTLP_HEADERS?: string | undefined;
  OTEL_METRICS_EXPORTER?: 'otlp' | 'none' | undefined;
  OTEL_TRACES_EXPORTER?: 'otlp' | 'none' | undefined;
  OTEL_SERVICE_NAME: string;
  OTEL_METRIC_EXPORT_INTERVAL: number;
}

/**
 * OTLP export as the OTEL_* variables say: a signal is exported when an endpoint names where
 * (OTEL_EXPORTER_OTLP_ENDPOINT, to which /v1/metrics or /v1/traces is added, or the signal's own
 * endpoint, taken as it is) and its OTEL_*_EXPORTER is not `none`; nothing when OTEL_SDK_DISABLED.
 */
export function otelConfig(e: OtelVariables): OtelConfig | undefined {
  if (e.OTEL_SDK_DISABLED === 'true') return undefined;
  const base = e.OTEL_EXPORTER_OTLP_ENDPOINT?.replace(/\/+$/, '');
  const signal = (exporter: 'otlp' | 'none' | undefined, own: string | undefined, path: string) =>
    exporter === 'none' ? undefined : (own ?? (base ? `${base}/${path}` : undefined));
  const metricsUrl = signal(
    e.OTEL_METRICS_EXPORTER,
    e.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT,
    'v1/metrics',
  );
  const tracesUrl = signal(
    e.OTEL_TRACES_EXPORTER,
    e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
    'v1/traces',
  );
  if (!metricsUrl && !tracesUrl) return undefined;
  const headers: Record<string, string> = {};
  for (const pair of (e.OTEL_EXPORTER_OTLP_HEADERS ?? '').split(',')) {
    const at = pair.indexOf('=');
    if (at > 0)
      headers[decodeURIComponent(pair.slice(0, at).trim())] = decodeURIComponent(
        pair.slice(at + 1).trim(),
      );
  }
  return {
    ...(metricsUrl ? { metricsUrl } : {}),
    ...(tracesUrl ? { tracesUrl } : {}),
    headers,
    serviceName: e.OTEL_SERVICE_NAME,
    exportIntervalMs: e.OTEL_METRIC_EXPORT_INTERVAL,
  };
}
