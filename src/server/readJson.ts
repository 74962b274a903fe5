import type { Context } from 'hono';
import type { AppEnv } from './appEnv.js';
import { errorBody, STATUS_INVALID_REQUEST } from './errorBody.js';
import { readBody, TOO_LARGE } from './readBody.js';
import { requestHeader } from './requestHeader.js';

const utf8 = new TextDecoder();

/**
 * A JSON request body, read up to `limit` bytes: the value, or the error answer to return (the
 * body too large: `tooLarge`, which each route's contract names; no JSON Content-Type or not JSON:
 * 400). A client that broke off reads as an empty body: nobody is left to read the answer.
 */
export async function readJson(
  c: Context<AppEnv>,
  limit: number,
  tooLarge: 400 | 413,
): Promise<{ ok: true; json: unknown } | { ok: false; response: Response }> {
  let body: Uint8Array | typeof TOO_LARGE | undefined;
  try {
    body = await readBody(c, limit);
  } catch {
    // the client broke off
  }
  const fail = (status: 400 | 413, message: string) => ({
    ok: false as const,
    response: errorBody(c, status, STATUS_INVALID_REQUEST, message),
  });
  if (body === TOO_LARGE) return fail(tooLarge, `Request body larger than ${limit} bytes`);
  if (!/^application\/json\s*(;|$)/i.test(requestHeader(c, 'content-type') ?? ''))
    return fail(400, 'Content-Type must be application/json');
  try {
    // TextDecoder as fetch's text(): a UTF-8 BOM is dropped, bad bytes become U+FFFD
    return { ok: true, json: JSON.parse(utf8.decode(body)) };
  } catch {
    return fail(400, 'The body is not valid JSON');
  }
}
