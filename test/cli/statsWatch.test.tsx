import { cleanup, render } from 'ink-testing-library';
import { afterEach, describe, expect, it } from 'vitest';
import type { StatsTotal } from '../../src/db/statsDimensions.js';
import { StatsWatch } from '../../src/cli/stats/StatsWatch.js';

afterEach(() => cleanup());

const APP = 'ABCDE12345.com.example.bank';

/** A data source whose answers the test hands out one by one; `asked` resolves on each read. */
function fakeSource() {
  const waiting: ((totals: StatsTotal[]) => void)[] = [];
  let onAsk: (() => void) | undefined;
  return {
    load: () =>
      new Promise<StatsTotal[]>((resolve) => {
        waiting.push(resolve);
        onAsk?.();
      }),
    /** resolves once a read is waiting */
    asked: () =>
      new Promise<void>((resolve) => {
        if (waiting.length) resolve();
        else onAsk = resolve;
      }),
    answer(totals: StatsTotal[]) {
      waiting.shift()!(totals);
    },
  };
}

/** Resolves once the last frame contains `text` (ink renders after React commits). */
async function frameWith(frames: () => string | undefined, text: string): Promise<string> {
  for (;;) {
    const frame = frames() ?? '';
    if (frame.includes(text)) return frame;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

describe('attest stats --watch', () => {
  it('shows per-app counts over 5 minutes, in one unit with the rejected and observed reasons side by side, refreshed', async () => {
    const source = fakeSource();
    const view = render(
      <StatsWatch load={source.load} refreshMs={1} now={() => new Date('2026-11-27T12:00:00Z')} />,
    );
    expect(view.lastFrame()).toContain('reading…');
    await source.asked();
    source.answer([
      { value: APP, mode: 'live', outcome: 'valid', reason: null, count: 50 },
      { value: APP, mode: 'live', outcome: 'rejected', reason: 'apple_counter_replay', count: 10 },
      { value: APP, mode: 'live', outcome: 'observed', reason: 'apple_risk_exceeded', count: 5 },
      { value: 'com.example.game', mode: 'live', outcome: 'error', reason: null, count: 1 },
    ]);
    const frame = await frameWith(view.lastFrame, APP);
    const lines = frame.split('\n');
    const row = lines.findIndex((l) => l.includes(APP));
    // counts over the 5 minutes, as the reasons under them are
    expect(lines[row]).toMatch(/\s50\s+10\s+5\s+0\s*$/);
    // the observed reasons beside the rejected ones
    expect(lines[row + 1]).toMatch(
      /^\s+rejected apple_counter_replay 10 │ observed apple_risk_exceeded 5\s*$/,
    );
    expect(frame).toMatch(/com\.example\.game\s+0\s+0\s+0\s+1/);
    expect(frame).toContain('counts over the last 5 min');
    expect(frame).toContain('12:00:00Z');

    // the next refresh replaces the figures
    await source.asked();
    source.answer([{ value: APP, mode: 'live', outcome: 'valid', reason: null, count: 25 }]);
    const next = await frameWith(view.lastFrame, ' 25 ');
    expect(next).not.toContain('apple_counter_replay');
    expect(next).not.toContain('com.example.game');
  });

  it('says when nothing was counted, shows a failed read, and q quits', async () => {
    const source = fakeSource();
    let quit = false;
    const failing = { first: true };
    const view = render(
      <StatsWatch
        load={() => {
          if (failing.first) {
            failing.first = false;
            return Promise.reject(new Error('the running "attest serve" cannot be reached'));
          }
          return source.load();
        }}
        refreshMs={1}
        onQuit={() => (quit = true)}
      />,
    );
    await frameWith(view.lastFrame, 'cannot read the statistics');
    await source.asked();
    source.answer([]);
    await frameWith(view.lastFrame, 'no verifications in the last 5 minutes');
    expect(view.lastFrame()).not.toContain('cannot read');
    view.stdin.write('q');
    await new Promise((resolve) => setImmediate(resolve));
    expect(quit).toBe(true);
  });
});

describe('attest stats --watch --mode', () => {
  it('the header names whose verifies it counts: live keys unless --mode says otherwise', async () => {
    const { statsRequest, watchFilters } = await import('../../src/cli/commands/stats.js');
    const flags = { since: '24h', by: 'app', watch: true };
    expect(watchFilters(statsRequest({ ...flags, mode: 'live' }))).toBe('live keys');
    expect(watchFilters(statsRequest({ ...flags, mode: 'test', app: APP }))).toBe(
      `test keys, app ${APP}`,
    );
    expect(watchFilters(statsRequest({ ...flags, mode: 'all' }))).toBe('live and test keys');
    const source = fakeSource();
    const view = render(<StatsWatch load={source.load} refreshMs={1} filters="test keys" />);
    await source.asked();
    source.answer([{ value: APP, mode: 'test', outcome: 'valid', reason: null, count: 3 }]);
    expect(await frameWith(view.lastFrame, APP)).toContain('· test keys');
  });
});
