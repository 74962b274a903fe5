import { describe, expect, it } from 'vitest';
import { meetsMinimumVerdict, strongestVerdict } from '../../../src/core/google/deviceVerdict.js';
import type { MinVerdict } from '../../../src/core/types.js';

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
