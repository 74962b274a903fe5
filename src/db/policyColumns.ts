import { sql, type SQL } from 'drizzle-orm';
import { ANDROID_KEY_POLICY_FIELDS } from '../core/androidKey/androidKeyPolicyFields.js';
import { APPLE_POLICY_FIELDS } from '../core/apple/applePolicyFields.js';
import { DEFAULT_ANDROID_POLICY } from '../core/gms/defaultAndroidPolicy.js';
import { GMS_VERDICT_FIELDS } from '../core/gms/gmsPolicyFields.js';
import type { PolicyField } from '../core/policyFields.js';
import type { AuditedColumn } from './auditedColumns.js';
import { parseTextArray, textArray } from './textArray.js';

/** A kind's rules stored one column each, with what a new entry holds for those not given. */
export interface RuleTable {
  fields: readonly PolicyField<never>[];
  /** the column defaults; only these keys are columns (the device limit spans two, the observed rules have their own change) */
  defaults: Readonly<Record<string, unknown>>;
}

export const APPLE_RULES: RuleTable = {
  fields: APPLE_POLICY_FIELDS,
  defaults: {
    requireReceipt: false,
    maxRiskMetric: null,
    validationCategories: [],
    minBundleVersion: null,
    allowMissingValidationCategory: false,
    platforms: [],
  },
};

export const ANDROID_RULES: RuleTable = {
  fields: [...GMS_VERDICT_FIELDS, ...ANDROID_KEY_POLICY_FIELDS],
  defaults: DEFAULT_ANDROID_POLICY,
};

/** The rules of `table` that are columns: the rule's key, its column (the key in snake case), whether it holds a list. */
function columnsOf({ fields, defaults }: RuleTable) {
  return fields
    .filter((f) => f.stored && f.key in defaults)
    .map(({ key }) => ({
      key,
      column: key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`),
      list: Array.isArray(defaults[key]),
    }));
}

/** The audit summary's entries for the rule columns: the rule's key, lists as jsonb arrays. */
export function ruleAudits(table: RuleTable): Record<string, AuditedColumn> {
  return Object.fromEntries(
    columnsOf(table).map(({ key, column, list }) => [
      column,
      list ? { key, value: (r: SQL) => sql`to_jsonb(${r}.${sql.identifier(column)})` } : { key },
    ]),
  );
}

/** One policy rule as an entry's column: its name, its value for a new entry, whether it was given. */
export interface RuleColumn {
  column: string;
  given: boolean;
  value: SQL;
}

/**
 * The rule columns of an upsert: a new entry gets the given value, else the default; an existing
 * one keeps the rules not given. Lists go as one text parameter (the two drivers bind array
 * parameters differently), bytes as hex.
 */
export function ruleColumns(table: RuleTable, policy: object): RuleColumn[] {
  return columnsOf(table).map(({ key, column }) => {
    const given = (policy as Record<string, unknown>)[key];
    const value = given ?? table.defaults[key];
    return {
      column,
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

/** `a, b, c` (or `u.a, u.b, u.c`): the rule columns of `table`, for a select. */
export function ruleColumnList(table: RuleTable, alias?: string): SQL {
  return sql.raw(
    columnsOf(table)
      .map((c) => (alias ? `${alias}.${c.column}` : c.column))
      .join(', '),
  );
}

/**
 * The rules of an entry from its row, by the policy's keys: lists from their text arrays, each
 * through its field's `read` where the column holds something else than the value.
 */
export function ruleValuesOf(table: RuleTable, row: object): Record<string, unknown> {
  const fields = new Map(table.fields.map((f) => [f.key, f]));
  return Object.fromEntries(
    columnsOf(table).map(({ key, column, list }) => {
      const raw = (row as Record<string, unknown>)[column];
      const plain = list
        ? parseTextArray(raw as string[] | string | null)
        : typeof raw === 'bigint'
          ? Number(raw)
          : raw;
      const read = fields.get(key)?.read;
      return [key, read ? read(plain) : plain];
    }),
  );
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
