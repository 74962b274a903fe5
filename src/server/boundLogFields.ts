/** Longest string kept for an identifier-like field (package names, key ids, reasons). */
export const IDENTIFIER_LIMIT = 256;
/** Longest string kept for prose (detail, error messages). */
export const MESSAGE_LIMIT = 512;
/** Most items kept of an array. */
export const ARRAY_LIMIT = 16;

const PROSE = new Set(['detail', 'message', 'receiptProblem']);

/** `text` cut to `limit` characters, marked with `…` and the original length when cut. */
export function truncate(text: string, limit: number): string {
  if (text.length <= limit) return text;
  return `${text.slice(0, limit)}…(${text.length} chars)`;
}

/**
 * A copy of a log record with every string cut short and every array capped, at any depth. Applied
 * where the request line is written, so a field a handler adds later cannot make the line
 * unbounded: much of what is logged comes from the client or an upstream (docs/security.md).
 */
export function boundLogFields<T>(value: T, key = ''): T {
  if (typeof value === 'string')
    return truncate(value, PROSE.has(key) ? MESSAGE_LIMIT : IDENTIFIER_LIMIT) as T;
  if (Array.isArray(value)) {
    const kept = value.slice(0, ARRAY_LIMIT).map((item) => boundLogFields(item, key));
    if (value.length > ARRAY_LIMIT) kept.push(`…(${value.length} items)`);
    return kept as T;
  }
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    let n = 0;
    for (const [k, v] of Object.entries(value)) {
      if (++n > 64) break;
      out[truncate(k, 64)] = boundLogFields(v, k);
    }
    return out as T;
  }
  return value;
}
