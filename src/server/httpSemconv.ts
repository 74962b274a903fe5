/**
 * OpenTelemetry's HTTP semantic conventions, as /metrics and the OTLP export both use them. Apart
 * from telemetry.ts so that /metrics does not load the OpenTelemetry SDK.
 */

/** The bucket boundaries (seconds) the conventions give http.server.request.duration. */
export const HTTP_DURATION_BUCKETS = [
  0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10,
];

/** `error.type` of an answer: its status code for a 5xx, else none. */
export function errorType(status: number): string | undefined {
  return status >= 500 ? String(status) : undefined;
}
