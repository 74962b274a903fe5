import type { Context } from 'hono';
import type { AppEnv } from './appEnv.js';

export const STATUS_OK = 0;
export const STATUS_INTERNAL_ERROR = 268505088;
export const STATUS_INVALID_REQUEST = 268505089;

/** The JSON error answer of docs/http-api.md; a 4xx message also goes to the request's log line. */
export function errorBody(
  c: Context<AppEnv>,
  status: 400 | 404 | 405 | 413 | 500 | 503,
  statusCode: number,
  errorMessage: string,
) {
  // the message names a rule of the request, never a secret: it is what `attest logs` shows for a 4xx
  const log = c.get('log');
  if (log && status < 500) log.detail = errorMessage;
  return c.json({ statusCode, errorMessage }, status);
}
