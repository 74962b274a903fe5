/**
 * The JSON of the admin API. Plain JSON loses two kinds the repositories return: a Date becomes a
 * string and bytes become an object of indices. Both are written as one-key objects
 * (`{"$date": ISO}`, `{"$bytes": base64}`) and read back as what they were, so a command gets the
 * same values through the running server as from the database it opened itself.
 */

/** `value` as admin-API JSON. */
export function toWire(value: unknown): string {
  return JSON.stringify(value, function (this: Record<string, unknown>, key, encoded: unknown) {
    // JSON.stringify has already applied Date's (and Buffer's) toJSON: look at the original
    const raw = this[key];
    if (raw instanceof Date) return { $date: raw.toISOString() };
    if (raw instanceof Uint8Array) return { $bytes: Buffer.from(raw).toString('base64') };
    return encoded;
  });
}

/** Admin-API JSON as values; throws SyntaxError on text that is not JSON. */
export function fromWire(text: string): unknown {
  return JSON.parse(text, (_key, value: unknown) => {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
    const keys = Object.keys(value);
    if (keys.length !== 1) return value;
    const v = value as { $date?: unknown; $bytes?: unknown };
    if (typeof v.$date === 'string') return new Date(v.$date);
    if (typeof v.$bytes === 'string') return new Uint8Array(Buffer.from(v.$bytes, 'base64'));
    return value;
  });
}
