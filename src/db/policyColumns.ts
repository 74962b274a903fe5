import { sql, type SQL } from 'drizzle-orm';
import type { PolicyField } from '../core/policyFields.js';
import { textArray } from './textArray.js';

/** One policy rule as an entry's column: its name, its value for a new entry, whether it was given. */
export interface RuleColumn {
  column: string;
  given: boolean;
  value: SQL;
}

/**
 * The rules of a kind's policy table stored one column each (named after the rule's key in snake
 * case: requireLicensed is require_licensed), for an upsert: a new entry gets the given value,
 * else the default; an existing one keeps the rules not given. Only the keys of `defaults` are
 * columns (the device limit spans two, the observed rules have their own change). Lists go as one
 * text parameter (the two drivers bind array parameters differently), bytes as hex.
 */
export function ruleColumns(
  fields: readonly PolicyField<never>[],
  policy: object,
  defaults: Readonly<Record<string, unknown>>,
): RuleColumn[] {
  return fields
    .filter((f) => f.stored && f.key in defaults)
    .map(({ key }) => {
      const given = (policy as Record<string, unknown>)[key];
      const value = given ?? defaults[key];
      return {
        column: key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`),
        given: given !== undefined,
        value: Array.isArray(value)
          ? textArray(
              (value as readonly (string | Uint8Array)[]).map((v) =>
                typeof v === 'string' ? v : Buffer.from(v).toString('hex'),
              ),
            )
          : sql`${value}`,
      };
    });
}

/** `a, b, c`: the columns, for the insert's column list. */
export function ruleColumnNames(rules: readonly RuleColumn[]): SQL {
  return sql.raw(rules.map((r) => r.column).join(', '));
}

/** The values of a new entry, in column order. */
export function ruleValues(rules: readonly RuleColumn[]): SQL {
  return sql.join(
    rules.map((r) => r.value),
    sql`, `,
  );
}

/** `on conflict ... do update set`: each rule given takes its new value, the others stay. */
export function ruleUpdates(rules: readonly RuleColumn[], table: string): SQL {
  return sql.join(
    rules.map(
      (r) => sql`${sql.raw(r.column)} = ${sql.raw(`${r.given ? 'excluded' : table}.${r.column}`)}`,
    ),
    sql`, `,
  );
}
