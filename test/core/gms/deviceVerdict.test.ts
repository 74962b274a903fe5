import { describe, expect, it } from 'vitest';
import { DEFAULT_ANDROID_POLICY } from '../../../src/core/gms/defaultAndroidPolicy.js';
import {
  meetsMinimumVerdict,
  MIN_VERDICT_LEVEL_NAMES,
  MIN_VERDICT_LEVELS,
  minVerdictLevelOf,
  strongestVerdict,
} from '../../../src/core/gms/deviceVerdict.js';
import type { MinVerdict } from '../../../src/core/ports.js';

const BASIC = 'MEETS_BASIC_INTEGRITY';
const DEVICE = 'MEETS_DEVICE_INTEGRITY';
const STRONG = 'MEETS_STRONG_INTEGRITY';

describe('device verdict ordering: BASIC < DEVICE < STRONG', () => {
  it.each<[string[], MinVerdict, boolean]>([
    [[BASIC], BASIC, true],
    [[BASIC], DEVICE, false],
    [[BASIC], STRONG, false],
    [[DEVICE], BASIC, true],
    [[DEVICE], DEVICE, true],
    [[DEVICE], STRONG, false],
    [[STRONG], BASIC, true],
    [[STRONG], DEVICE, true],
    [[STRONG], STRONG, true],
    [[STRONG, BASIC], DEVICE, true],
    [[], BASIC, false],
    [['MEETS_VIRTUAL_INTEGRITY'], BASIC, false],
    [['meets_strong_integrity'], BASIC, false],
  ])('%j meets %s: %s', (verdicts, minimum, expected) => {
    expect(meetsMinimumVerdict(verdicts, minimum)).toBe(expected);
  });

  it('names the strongest ranked verdict', () => {
    expect(strongestVerdict([DEVICE, 'MEETS_VIRTUAL_INTEGRITY', BASIC])).toBe(DEVICE);
    expect(strongestVerdict(['MEETS_VIRTUAL_INTEGRITY'])).toBeNull();
  });
});

describe('minimum verdict short names', () => {
  it('round-trips every level, and names the default', () => {
    for (const level of MIN_VERDICT_LEVEL_NAMES)
      expect(minVerdictLevelOf(MIN_VERDICT_LEVELS[level])).toBe(level);
    expect(MIN_VERDICT_LEVEL_NAMES).toEqual(['basic', 'device', 'strong']);
    expect(minVerdictLevelOf(DEFAULT_ANDROID_POLICY.minVerdict)).toBe('device');
  });
});
