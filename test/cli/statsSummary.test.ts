// The text of `attest stats`: --by minute in time order, and the rollout view of observed rules.
import { describe, expect, it } from 'vitest';
import type { StatsTotal } from '../../src/db/statsDimensions.js';
import { rolloutNote } from '../../src/cli/kinds/observeOptions.js';
import { rolloutText, statsText } from '../../src/cli/stats/statsSummary.js';

const window = { since: new Date('2026-11-28T10:00:00Z'), until: new Date('2026-11-28T11:00:00Z') };

describe('attest stats text', () => {
  it('--by minute: rows in time order, whatever their counts', () => {
    const minute = (m: string, count: number): StatsTotal => ({
      value: `2026-11-28T10:${m}:00Z`,
      mode: 'live',
      outcome: 'valid',
      reason: null,
      count,
    });
    const text = statsText([minute('03', 1), minute('01', 50), minute('02', 7)], 'minute', window);
    const rows = text.split('\n').filter((l) => l.startsWith('2026-'));
    expect(rows.map((r) => r.slice(14, 16))).toEqual(['01', '02', '03']);
    // by app the busiest comes first, as before
    const apps = statsText(
      [
        { value: 'a', mode: 'live', outcome: 'valid', reason: null, count: 1 },
        { value: 'b', mode: 'live', outcome: 'valid', reason: null, count: 9 },
      ],
      'app',
      window,
    );
    expect(apps.indexOf('\nb ')).toBeLessThan(apps.indexOf('\na '));
  });

  it('the rollout view: per observed rule, since when, verifies, valid, would reject, share', () => {
    const text = rolloutText([
      {
        app: 'com.example.bank',
        mode: 'live' as const,
        reason: 'gms_play_protect',
        observedSince: new Date('2026-11-28T10:15:30Z'),
        verifies: 20,
        valid: 16,
        wouldReject: 2,
        share: 0.125,
        devices: 9,
        wouldRejectDevices: 1,
      },
      {
        app: 'com.example.bank',
        mode: 'live' as const,
        reason: 'gms_device_activity',
        observedSince: null,
        verifies: 0,
        valid: 0,
        wouldReject: 0,
        share: null,
        devices: null,
        wouldRejectDevices: null,
      },
    ]);
    expect(text).toMatch(
      /com\.example\.bank\s+gms_play_protect\s+2026-11-28T10:15:30Z\s+20\s+16\s+2\s+12\.5%\s+1\/9/,
    );
    expect(text).toMatch(/gms_device_activity\s+\(not in the audit trail\)\s+0\s+0\s+0\s+-\s+-$/m);
    expect(rolloutText([])).toBe('');
  });

  it('allowlist add: --observe names the command that shows the share, --enforce says what it was', () => {
    expect(rolloutNote('com.example.bank', { observe: ['gms_play_protect'] }, [])).toBe(
      'observing gms_play_protect: the share it would turn away, counted from now: attest stats --app com.example.bank (live keys; a rehearsal with test keys: --mode test)\n',
    );
    const before = [
      {
        app: 'com.example.bank',
        mode: 'live' as const,
        reason: 'gms_play_protect',
        observedSince: new Date('2026-11-28T10:15:30Z'),
        verifies: 20,
        valid: 16,
        wouldReject: 2,
        share: 0.125,
        devices: 9,
        wouldRejectDevices: 1,
      },
    ];
    expect(rolloutNote('com.example.bank', { enforce: ['gms_play_protect'] }, before)).toBe(
      'gms_play_protect enforced: while observed (since 2026-11-28T10:15:30Z) it would have rejected 2 of 16 valid verifies of live keys (12.5%), 1 of 9 devices\n',
    );
    expect(rolloutNote('com.example.bank', { enforce: ['gms_device_activity'] }, before)).toBe('');
    expect(rolloutNote('com.example.bank', undefined, before)).toBe('');
  });
});
