/**
 * Play device recall, read side: `deviceIntegrity.deviceRecall` is checked against Google's layout
 * (a wrong type is a malformed verdict, never a guess), its bits and write dates reach
 * `googleTokenDetails.deviceRecall`, and `denyRecallBits` rejects a token with a denied bit set
 * (`gms_device_recalled`, check `gms.deviceRecall`), for classic and standard tokens alike.
 */

import { describe, expect, it } from 'vitest';
import { verdictPayload } from '../../../src/core/dev/playIntegrityMint.js';

import { parsePlayIntegrityJson } from '../../../src/core/gms/playIntegrityPayload.js';
import { parseRecallBitList } from '../../../src/core/gms/verdictPolicy.js';

import type { AndroidPackagePolicy } from '../../../src/core/ports.js';
import { TEST_PACKAGE, randomNonce } from '../../support/googleFactory.js';
import { verdictOutcome, withReason, type VerdictEdit } from '../../support/verdictOutcome.js';

const NOW = new Date('2026-03-01T12:00:00.000Z');
const nonce = randomNonce();

type Edit = VerdictEdit;
const verify = verdictOutcome(NOW, nonce);

const outcome = async (...args: Parameters<typeof verify>) => withReason(await verify(...args));

/** Sets the verdict's deviceRecall (undefined removes it). */
const recall =
  (value: unknown): Edit =>
  (p) => {
    if (value === undefined) delete p.deviceIntegrity.deviceRecall;
    else p.deviceIntegrity.deviceRecall = value;
  };
const bits = (first: boolean, second: boolean, third: boolean) =>
  recall({ values: { bitFirst: first, bitSecond: second, bitThird: third } });

describe.each(['classic', 'standard'] as const)('%s requests', (kind) => {
  it("carries Google's bits and write dates in googleTokenDetails.deviceRecall", async () => {
    const { run } = await outcome(kind, {});
    expect(run.ok && run.details.service === 'gms' && run.details.googleTokenDetails).toMatchObject(
      {
        deviceRecall: {
          bitFirst: true,
          bitSecond: false,
          bitThird: true,
          writeDates: { yyyymmFirst: 202401, yyyymmSecond: 202312, yyyymmThird: 202401 },
        },
      },
    );
  });

  it('leaves deviceRecall out when the verdict has none, and a write date out when Google gives none', async () => {
    const none = await outcome(kind, {}, recall(undefined));
    expect(none.run.ok && 'deviceRecall' in none.run.details).toBe(false);
    const undated = await outcome(kind, {}, bits(false, true, false));
    expect(undated.run.ok && undated.run.details).toMatchObject({
      googleTokenDetails: { deviceRecall: { bitFirst: false, bitSecond: true, bitThird: false } },
    });
    expect(
      undated.run.ok &&
        undated.run.details.service === 'gms' &&
        'writeDates' in undated.run.details.googleTokenDetails.deviceRecall!,
    ).toBe(false);
  });

  it('reads a bit Google leaves out as false (proto3 JSON drops false booleans)', async () => {
    const { run } = await outcome(kind, {}, recall({ values: { bitThird: true } }));
    expect(run.ok && run.details).toMatchObject({
      googleTokenDetails: { deviceRecall: { bitFirst: false, bitSecond: false, bitThird: true } },
    });
  });

  it.each([
    ['a bit that is not a boolean', { values: { bitFirst: 'true' } }, /bitFirst/],
    ['no values', { writeDates: {} }, /values/],
    [
      'a write date that is not a month',
      { values: {}, writeDates: { yyyymmFirst: 202413 } },
      /yyyymmFirst/,
    ],
    [
      'a write date that is not a number',
      { values: {}, writeDates: { yyyymmSecond: 'May' } },
      /yyyymmSecond/,
    ],
    ['deviceRecall not an object', 'yes', /deviceRecall/],
  ])('refuses %s as a malformed verdict', async (_name, value, where) => {
    const { reason, run } = await outcome(kind, {}, recall(value));
    expect(reason).toBe('gms_payload_malformed');
    expect(!run.ok && run.detail).toMatch(where);
  });

  const cases: [string, Partial<AndroidPackagePolicy>, Edit, string, 'pass' | 'fail' | 'skip'][] = [
    ['no policy, bits set', {}, bits(true, true, true), 'accepted', 'skip'],
    [
      'deny first, first set',
      { denyRecallBits: ['first'] },
      bits(true, false, false),
      'gms_device_recalled',
      'fail',
    ],
    [
      'deny first, third set',
      { denyRecallBits: ['first'] },
      bits(false, false, true),
      'accepted',
      'pass',
    ],
    [
      'deny second+third, third set',
      { denyRecallBits: ['second', 'third'] },
      bits(false, false, true),
      'gms_device_recalled',
      'fail',
    ],
    [
      'deny all, none set',
      { denyRecallBits: ['first', 'second', 'third'] },
      bits(false, false, false),
      'accepted',
      'pass',
    ],
    [
      'deny first, no deviceRecall in the verdict',
      { denyRecallBits: ['first'] },
      recall(undefined),
      'accepted',
      'pass',
    ],
  ];
  it.each(cases)('%s', async (_name, policy, edit, expected, status) => {
    const { reason, run } = await outcome(kind, policy, edit);
    expect(reason).toBe(expected);
    expect(run.checks.find((c) => c.id === 'gms.deviceRecall')?.status).toBe(status);
    if (expected === 'gms_device_recalled') {
      expect(!run.ok && run.detail).toMatch(/denies/);
      // freshness never ran: the recall step stopped the verification
      expect(run.checks.find((c) => c.id === 'gms.freshness')?.status).toBe('skip');
    }
  });
});

describe('flag values', () => {
  it('--deny-recall-bits and --recall take first, second, third in any case and order', () => {
    expect(parseRecallBitList('third, FIRST')).toEqual({ ok: true, values: ['first', 'third'] });
    expect(parseRecallBitList('bitSecond,second')).toEqual({ ok: true, values: ['second'] });
    expect(parseRecallBitList('fourth').ok).toBe(false);
    expect(parseRecallBitList(' , ').ok).toBe(false);
  });
});

describe('dev mint gms --recall', () => {
  it('writes the bits and the month of issue in the layout the verifier reads', () => {
    const payload = verdictPayload({
      packageName: TEST_PACKAGE,
      nonce,
      issuedAt: new Date('2026-11-27T12:00:00Z'),
      deviceVerdicts: ['MEETS_DEVICE_INTEGRITY'],
      recognition: 'PLAY_RECOGNIZED',
      certificateDigests: [],
      recallBits: ['second'],
    });
    const parsed = parsePlayIntegrityJson(payload);
    expect(parsed.ok && parsed.payload.deviceIntegrity.deviceRecall).toEqual({
      values: { bitFirst: false, bitSecond: true, bitThird: false },
      writeDates: { yyyymmSecond: 202611 },
    });
    const without = verdictPayload({
      packageName: TEST_PACKAGE,
      nonce,
      issuedAt: NOW,
      deviceVerdicts: [],
      recognition: 'PLAY_RECOGNIZED',
      certificateDigests: [],
    });
    expect(without.deviceIntegrity).toEqual({});
  });
});
