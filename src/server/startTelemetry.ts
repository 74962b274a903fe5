import type { OtelConfig } from '../otelConfig.js';
import { packageVersion } from '../packageVersion.js';
import type { Telemetry } from './telemetry.js';

/** OTLP export when the OTEL_* variables ask for it; the SDK is not even loaded otherwise. */
export async function startTelemetry(otel: OtelConfig | undefined): Promise<Telemetry | undefined> {
  if (!otel) return undefined;
  const { createTelemetry } = await import('./telemetry.js');
  return createTelemetry(otel, packageVersion());
}
