import { z } from 'zod';
import { parseDuration } from './duration.js';
import { DEVICE_LIMIT_BOUNDS } from './deviceVelocity.js';
import type { DeviceLimit } from './ports.js';

/** A parse of operator text: the value, or the one-line problem shown to the operator. */
export type Parsed<T> = { ok: true; value: T } | { ok: false; problem: string };

/**
 * One rule of an allowlist entry's policy, declared once: its property in the policy, its
 * `allowlist add` flag with help, how the flag's text becomes the stored value, and its words in
 * `allowlist list`. Each kind keeps a table of these beside its verifier; the CLI builds its
 * options, their parsing and the list summary from the table, so a new rule is one entry.
 * @typeParam V the entry as listed (what `summary` reads)
 */
export interface PolicyField<V = never> {
  /** the property of the policy input it sets */
  key: string;
  /**
   * the flag as commander spells it: `--require-receipt`, `--max-age <n>`, `--require-play-protect
   * [verdicts]`; none for a rule set by flags of its own that still shows in the list (the observed
   * rules, set by `--observe` and `--enforce` together)
   */
  flag?: string;
  help?: string;
  /** the only words the flag takes (checked before `text`) */
  choices?: readonly string[];
  /** the flag's text to the stored value; the issue's message is the usage error, word for word */
  text?: z.ZodType<unknown, string>;
  /** repeatable: each use gives one value parsed by `text`, and the list replaces the stored one */
  repeatable?: boolean;
  /** what the flag without its value sets: true for a switch, a default for `[value]` */
  bare?: unknown;
  /** the `--no-` form: its help and the value it stores */
  no?: { help: string; value: unknown };
  /**
   * the stored value as the admin operation accepts it (within the bounds `text` keeps to; null
   * where `--no-` clears it): the operation's input schema is built from the table
   */
  stored?: z.ZodType;
  /** a few words for `allowlist list`, or undefined while the rule is off */
  summary?: (entry: V) => string | undefined;
  /**
   * the policy value of what the column holds, where that is not the value itself (lists arrive
   * as text lists, numbers as numbers): bytes stored as hex, a value an older or newer version wrote
   */
  read?: (stored: unknown) => unknown;
}

/**
 * A zod schema from operator text to a value, failing with `parse`'s problem as its message (the
 * message names the flag and quotes the text, so it is the usage error as the operator sees it).
 */
export function textSchema<T>(parse: (text: string) => Parsed<T>): z.ZodType<T, string> {
  return z.string().transform((text, ctx) => {
    const parsed = parse(text);
    if (parsed.ok) return parsed.value;
    ctx.issues.push({ code: 'custom', message: parsed.problem, input: text });
    return z.NEVER;
  });
}

/**
 * An on/off rule: the bare flag stores true, its `--no-` form false.
 * @param summary the list's words, when the rule shows
 */
export function switchField<V>(
  key: string,
  flag: string,
  [help, noHelp]: readonly [string, string],
  summary?: (entry: V) => string | undefined,
): PolicyField<V> {
  return {
    key,
    flag,
    help,
    bare: true,
    no: { help: noHelp, value: false },
    stored: z.boolean(),
    summary,
  };
}

/** The property commander gives a flag's value: `--max-risk-metric <n>` is `maxRiskMetric`. */
export function flagAttribute(flag: string): string {
  const name = /--(?:no-)?([a-z0-9-]+)/.exec(flag)?.[1] ?? '';
  return name.replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

/** The long name of a field's flag, without value: `--max-risk-metric`. */
export function flagName(field: Pick<PolicyField<unknown>, 'flag'>): string {
  return field.flag?.split(' ')[0] ?? '';
}

/**
 * The policy fields the flags set; a flag not given leaves its property out (the stored value is
 * kept). `flags` are the parsed options by `flagAttribute`: text (or texts, for a repeatable flag),
 * `true` for the bare flag, `false` for its `--no-` form. The first bad value is the problem.
 */
export function policyFromFlags(
  fields: readonly PolicyField<never>[],
  flags: Readonly<Record<string, unknown>>,
): Parsed<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const field of fields) {
    if (field.flag === undefined) continue;
    const given = flags[flagAttribute(field.flag)];
    if (given === undefined) continue;
    if (given === false) {
      if (field.no) out[field.key] = field.no.value;
    } else if (given === true) {
      if (field.bare !== undefined) out[field.key] = field.bare;
    } else {
      const texts = Array.isArray(given) ? given : [given];
      const values: unknown[] = [];
      for (const text of texts) {
        if (!field.text) {
          values.push(text);
          continue;
        }
        const parsed = field.text.safeParse(String(text));
        if (!parsed.success) return { ok: false, problem: parsed.error.issues[0]!.message };
        values.push(parsed.data);
      }
      out[field.key] = field.repeatable ? values : values[0];
    }
  }
  return { ok: true, value: out };
}

/**
 * The admin operation's input for the fields: each stored value, optional (absent = kept). The
 * caller types the object it builds from it as its repository's policy input.
 */
export function policyInputShape(
  fields: readonly PolicyField<never>[],
): Record<string, z.ZodOptional<z.ZodType>> {
  return Object.fromEntries(
    fields.flatMap((f) => (f.stored ? [[f.key, f.stored.optional()] as const] : [])),
  );
}

/** The summaries of the rules an entry sets, in table order. */
export function describePolicy<V>(fields: readonly PolicyField<V>[], entry: V): string[] {
  return fields.flatMap((f) => f.summary?.(entry) ?? []);
}

/**
 * The observed rules of an entry in the list; set by `--observe` and `--enforce` together (a
 * change to the stored set, checked against the kind's observable codes), so it has no flag here.
 */
export const OBSERVED_RULES_FIELD: PolicyField<{ observe?: readonly string[] }> = {
  key: 'observe',
  summary: (e) => (e.observe?.length ? `observe ${e.observe.join('|')}` : undefined),
};

const LIMIT_FLAG = '--max-verifies-per-device';
const { maxVerifies, periodSeconds } = DEVICE_LIMIT_BOUNDS;

/** `100/1h`: a limit as the flag writes it (the largest unit that divides the period). */
export function formatDeviceLimit(limit: DeviceLimit): string {
  return `${limit.max}/${formatPeriod(limit.periodSeconds)}`;
}

function formatPeriod(seconds: number): string {
  for (const [unit, size] of [
    ['d', 86_400],
    ['h', 3600],
    ['m', 60],
  ] as const)
    if (seconds % size === 0) return `${seconds / size}${unit}`;
  return `${seconds}s`;
}

/** `N/PERIOD` as a device limit within DEVICE_LIMIT_BOUNDS. */
export function parseDeviceLimit(text: string): Parsed<DeviceLimit> {
  const m = /^\s*(\d{1,9})\s*\/\s*(\S+)\s*$/.exec(text);
  if (!m)
    return {
      ok: false,
      problem: `${LIMIT_FLAG} takes N/PERIOD such as 100/1h or 1000/1d, got "${text}"`,
    };
  const max = Number(m[1]);
  if (max < maxVerifies.min || max > maxVerifies.max)
    return {
      ok: false,
      problem: `${LIMIT_FLAG}: N must be ${maxVerifies.min} to ${maxVerifies.max}, got ${m[1]}`,
    };
  const seconds = parseDuration(m[2]!);
  if (seconds === null || seconds < periodSeconds.min || seconds > periodSeconds.max)
    return {
      ok: false,
      problem: `${LIMIT_FLAG}: PERIOD must be a duration from 1m to 30d such as 1h, 1d or 1w, got "${m[2]}"`,
    };
  return { ok: true, value: { max, periodSeconds: seconds } };
}

/**
 * `--max-verifies-per-device N/PERIOD` and its `--no-` form, shared by the kinds that count
 * verifies per device.
 * @param counted what a device is for the kind, in the help
 * @param summary the list's words around the formatted limit
 */
export function deviceLimitField<V extends { maxVerifiesPerDevice?: DeviceLimit | null }>(
  counted: string,
  summary: (limit: string) => string,
): PolicyField<V> {
  return {
    key: 'maxVerifiesPerDevice',
    flag: `${LIMIT_FLAG} <n/period>`,
    help: `at most N valid verifies per device in each fixed window of PERIOD, e.g. 100/1h or 1000/1d (N 1 to ${maxVerifies.max}, PERIOD 1m to 30d; windows start at multiples of PERIOD since 1970-01-01 UTC); past N a verify is rejected (device_rate_exceeded). A device is ${counted}`,
    text: textSchema(parseDeviceLimit),
    no: { help: 'stop counting verifies per device', value: null },
    stored: z
      .strictObject({
        max: z.number().int().min(maxVerifies.min).max(maxVerifies.max),
        periodSeconds: z.number().int().min(periodSeconds.min).max(periodSeconds.max),
      })
      .nullable(),
    summary: (e) =>
      e.maxVerifiesPerDevice ? summary(formatDeviceLimit(e.maxVerifiesPerDevice)) : undefined,
  };
}
