import { describe, expect, it } from 'vitest';
import { APPLE_POLICY_FIELDS } from '../../src/core/apple/applePolicyFields.js';
import {
  deviceLimitField,
  describePolicy,
  flagAttribute,
  policyFromFlags,
  textSchema,
  type PolicyField,
} from '../../src/core/policyFields.js';

interface Rules {
  level?: number | null;
  strict?: boolean;
  tags?: string[];
  maxVerifiesPerDevice?: { max: number; periodSeconds: number } | null;
}

const FIELDS: readonly PolicyField<Rules>[] = [
  {
    key: 'level',
    flag: '--max-level <n>',
    help: 'highest level',
    text: textSchema((t) =>
      /^\d+$/.test(t)
        ? { ok: true, value: Number(t) }
        : { ok: false, problem: `--max-level: "${t}"` },
    ),
    no: { help: 'no level', value: null },
    summary: (r) => (r.level != null ? `level <= ${r.level}` : undefined),
  },
  {
    key: 'strict',
    flag: '--strict',
    help: 'be strict',
    bare: true,
    no: { help: 'be lenient', value: false },
    summary: (r) => (r.strict ? 'strict' : undefined),
  },
  {
    key: 'tags',
    flag: '--tag [name]',
    help: 'a tag; repeatable',
    repeatable: true,
    bare: ['default'],
    text: textSchema((t) => ({ ok: true, value: t.toUpperCase() })),
  },
  deviceLimitField<Rules>('a thing', (limit) => `${limit} per thing`),
];

describe('policy fields', () => {
  it('names the option property as commander does', () => {
    expect(flagAttribute('--max-verifies-per-device <n/period>')).toBe('maxVerifiesPerDevice');
    expect(flagAttribute('--require-play-protect [verdicts]')).toBe('requirePlayProtect');
    expect(flagAttribute('--strict')).toBe('strict');
  });

  it('sets only the given flags: text parsed, bare value, --no- value, repeated texts', () => {
    expect(policyFromFlags(FIELDS, {})).toEqual({ ok: true, value: {} });
    expect(
      policyFromFlags(FIELDS, {
        maxLevel: '7',
        strict: false,
        tag: ['a', 'b'],
        maxVerifiesPerDevice: '100/1h',
      }),
    ).toEqual({
      ok: true,
      value: {
        level: 7,
        strict: false,
        tags: ['A', 'B'],
        maxVerifiesPerDevice: { max: 100, periodSeconds: 3600 },
      },
    });
    expect(
      policyFromFlags(FIELDS, {
        maxLevel: false,
        strict: true,
        tag: true,
        maxVerifiesPerDevice: false,
      }),
    ).toEqual({
      ok: true,
      value: { level: null, strict: true, tags: ['default'], maxVerifiesPerDevice: null },
    });
  });

  it("a bad value is the field's own message, the first in table order", () => {
    expect(policyFromFlags(FIELDS, { maxLevel: 'x' })).toEqual({
      ok: false,
      problem: '--max-level: "x"',
    });
    expect(policyFromFlags(FIELDS, { maxVerifiesPerDevice: '5/99d', maxLevel: 'y' })).toEqual({
      ok: false,
      problem: '--max-level: "y"',
    });
    expect(policyFromFlags(FIELDS, { maxVerifiesPerDevice: '100' })).toEqual({
      ok: false,
      problem: '--max-verifies-per-device takes N/PERIOD such as 100/1h or 1000/1d, got "100"',
    });
  });

  it('summarizes the rules an entry sets, in table order', () => {
    expect(describePolicy(FIELDS, {})).toEqual([]);
    expect(
      describePolicy(FIELDS, {
        level: 0,
        strict: true,
        maxVerifiesPerDevice: { max: 5, periodSeconds: 86_400 },
      }),
    ).toEqual(['level <= 0', 'strict', '5/1d per thing']);
  });

  it('every apple flag has help and a value it stores', () => {
    for (const field of APPLE_POLICY_FIELDS.filter((f) => f.flag)) {
      expect(field.help, field.key).toBeTruthy();
      expect(field.text !== undefined || field.bare !== undefined, field.key).toBe(true);
    }
  });
});
