import { randomUUID } from 'node:crypto';
import { createMiddleware } from 'hono/factory';
import type { Logger } from 'pino';
import type { AppEnv, RequestLog } from '../appEnv.js';
import type { Metrics } from '../metrics.js';
import { boundLogFields } from '../boundLogFields.js';
import { requestHeader } from '../requestHeader.js';
import type { Telemetry } from '../telemetry.js';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * Request id (a valid `X-Request-Id` is kept, else a new UUID, echoed on the answer), timing, the
 * request metric and the single log line of each request. Handlers add their facts to `c.get('log')`;
 * `route` is the path when it is one of `routes`, else "unmatched" (no client text in metric labels).
 */
export const requestLog = (opts: {
  logger: Logger;
  metrics: Pick<Metrics, 'observeRequest'>;
  routes: Readonly<Record<string, unknown>>;
  /** OTLP export: a span for each request to the API (/api/...) */
  telemetry?: Pick<Telemetry, 'traceRequest'> | undefined;
}) =>
  createMiddleware<AppEnv>(async (c, next) => {
    const started = performance.now();
    const given = requestHeader(c, 'x-request-id');
    const requestId = given && REQUEST_ID.test(given) ? given : randomUUID();
    const path = c.req.path;
    const log: RequestLog = {
      requestId,
      method: c.req.method,
      route: path in opts.routes ? path : 'unmatched',
    };
    c.set('log', log);
    // on Node's response before Hono makes one: a header set on Hono's answer turns its plain
    // header object into a web Headers that the adapter then converts back (docs/benchmark-http.md)
    const outgoing = c.env?.outgoing;
    outgoing?.setHeader('X-Request-Id', requestId);
    try {
      await next();
    } finally {
      if (!outgoing) c.res.headers.set('X-Request-Id', requestId);
      const durationMs = Math.round((performance.now() - started) * 100) / 100;
      opts.metrics.observeRequest(log.route, c.req.method, c.res.status, durationMs / 1000);
      if (opts.telemetry && log.route.startsWith('/api/')) {
        const endedAt = Date.now();
        opts.telemetry.traceRequest({
          log,
          status: c.res.status,
          startedAt: endedAt - durationMs,
          endedAt,
          traceparent: requestHeader(c, 'traceparent'),
          tracestate: requestHeader(c, 'tracestate'),
        });
      }
      const level = c.res.status >= 500 ? 'error' : 'info';
      // every field bounded here, whoever set it: a request's log line stays short whatever it claimed
      opts.logger[level]({ ...boundLogFields(log), status: c.res.status, durationMs }, 'request');
    }
  });
