import type { Context } from 'hono';
import type { AppEnv } from './appEnv.js';

/**
 * A request header, as `c.req.header(name)` would answer it (repeated fields joined with ", ").
 * Under @hono/node-server it is read from Node's own parsed headers: asking Hono builds a web
 * Headers object of every field of the request, a measurable share of a small request's CPU
 * (docs/benchmark-http.md). Elsewhere (app.request in tests) Hono answers.
 * @param name the field name in lower case
 */
export function requestHeader(c: Context<AppEnv>, name: string): string | undefined {
  const fields = c.env?.incoming?.headersDistinct;
  if (fields) return fields[name]?.join(', ');
  return c.req.header(name);
}
