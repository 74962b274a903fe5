import { sql } from 'drizzle-orm';

/** A text[] of plain words (hex, enum values: nothing that needs quoting in the literal). */
export function parseTextArray(value: string[] | string | null): string[] {
  return typeof value === 'string'
    ? value
        .replace(/^\{|\}$/g, '')
        .split(',')
        .filter(Boolean)
    : (value ?? []);
}

/** A text[] parameter sent as one text (the two drivers bind array parameters differently). */
export function textArray(list: readonly string[] | undefined) {
  return list && list.length > 0 ? sql`string_to_array(${list.join(',')}, ',')` : sql`'{}'::text[]`;
}
