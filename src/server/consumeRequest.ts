/**
 * The longest `resultToken` a consume accepts. A result token is about a kilobyte (its details
 * are those of one verify); anything far longer is not one, and is refused before any parsing.
 */
export const RESULT_TOKEN_MAX_CHARS = 8192;

/**
 * Validates a consume body: a JSON object with a non-empty string `resultToken` of at most
 * RESULT_TOKEN_MAX_CHARS. Any failure is a malformed request (HTTP 400, 268505089); whether the
 * string is a token the deployment signed is the consume's answer (`valid`), not a 400.
 */
export function parseConsumeRequest(
  json: unknown,
): { ok: true; resultToken: string } | { ok: false; message: string } {
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    return { ok: false, message: 'the body must be a JSON object' };
  const token = (json as Record<string, unknown>).resultToken;
  if (token === undefined || token === null)
    return { ok: false, message: 'resultToken is required' };
  if (typeof token !== 'string') return { ok: false, message: 'resultToken must be a string' };
  if (token.length === 0) return { ok: false, message: 'resultToken must not be empty' };
  if (token.length > RESULT_TOKEN_MAX_CHARS)
    return {
      ok: false,
      message: `resultToken must be at most ${RESULT_TOKEN_MAX_CHARS} characters`,
    };
  return { ok: true, resultToken: token };
}
