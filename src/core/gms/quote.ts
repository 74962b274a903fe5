/**
 * A token-supplied value for a detail line: JSON-quoted (so no control characters or newlines
 * reach a log line) and cut to 40 characters. Details are for people, never for machines.
 * @param value the untrusted value
 */
export function quote(value: unknown): string {
  if (typeof value !== 'string') return value === undefined ? '(none)' : '(not text)';
  return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
}
