import { render } from 'ink-testing-library';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { cleanup } from 'ink-testing-library';
import { NO_FILTER } from '../../../src/cli/logs/logFilter.js';
import { LogStore } from '../../../src/cli/logs/logStore.js';
import { LogViewer } from '../../../src/cli/logs/LogViewer.js';
import { plainLine, requestLine } from './sampleLog.js';

afterEach(() => cleanup());

const KEYS = {
  up: '\u001B[A',
  down: '\u001B[B',
  pageDown: '\u001B[6~',
  enter: '\r',
  tab: '\t',
  escape: '\u001B',
};

const at = (s: number) => new Date(Date.parse('2026-11-22T21:00:00.000Z') + s * 1000).toISOString();

/** A small log with a line of each kind; times one second apart so rows can be told apart by time. */
function fixture(): string[] {
  return [
    plainLine(30, 'listening', { time: at(0), port: 8080 }),
    requestLine({
      time: at(1),
      requestId: 'r1',
      isValid: false,
      reason: 'apple_counter_replay',
      detail: 'counter 3 is not above the stored 5',
      keyId: 'KEYID-ONE',
      apiKeyId: 'key0000000000001',
    }),
    requestLine({
      time: at(2),
      requestId: 'r2',
      service: 'gms',
      isValid: false,
      reason: 'gms_token_stale',
      packageName: 'com.example',
      apiKeyId: 'key0000000000002',
    }),
    requestLine({
      time: at(3),
      requestId: 'r3',
      isValid: true,
      keyId: 'KEYID-TWO',
      apiKeyId: 'key0000000000001',
    }),
    requestLine({
      time: at(4),
      requestId: 'r4',
      isValid: false,
      reason: 'apple_counter_replay',
      keyId: 'KEYID-ONE',
      apiKeyId: 'key0000000000002',
    }),
    requestLine({
      time: at(5),
      requestId: 'r5',
      status: 403,
      auth: 'revoked',
      isValid: undefined,
      service: undefined,
      apiKeyId: undefined,
      approach: undefined,
    }),
    'Killed',
  ];
}

function setup(
  options: { width?: number; height?: number; lines?: string[]; limit?: number } = {},
) {
  const store = new LogStore(options.limit ?? 100, 'app.log');
  store.append(options.lines ?? fixture());
  store.setStatus({ phase: 'done' });
  const onQuit = vi.fn();
  const ui = render(
    <LogViewer
      store={store}
      width={options.width ?? 100}
      height={options.height ?? 24}
      onQuit={onQuit}
    />,
  );
  const frame = () => ui.lastFrame() ?? '';
  /** Waits (with a deadline) until the frame shows `text`. */
  const shows = (text: string | RegExp) =>
    vi.waitFor(
      () => expect(frame()).toMatch(typeof text === 'string' ? new RegExp(escape(text)) : text),
      { timeout: 10_000, interval: 5 },
    );
  /** The line of the frame that holds the selection mark. */
  const selected = () =>
    frame()
      .split('\n')
      .find((l) => l.startsWith('›')) ?? '';
  return { store, ui, frame, shows, selected, onQuit, press: (s: string) => ui.stdin.write(s) };
}
const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

describe('LogViewer', () => {
  it('lists the lines newest last with the newest selected, a summary and the keys', () => {
    const { frame, selected } = setup();
    const f = frame();
    expect(f).toContain('attest logs');
    expect(f).toContain('app.log');
    expect(f).toContain('7 lines · 7 shown');
    expect(f).toMatch(/TIME \(UTC\) +ST +ROUTE +SVC/);
    const rows = f.split('\n');
    const first = rows.findIndex((l) => l.includes('21:00:01.000'));
    const last = rows.findIndex((l) => l.includes('21:00:05.000'));
    expect(first).toBeGreaterThan(0);
    expect(last).toBeGreaterThan(first);
    expect(f).toMatch(/21:00:01\.000 200 .*apple +✗ apple_counter_replay/);
    expect(f).toMatch(/21:00:00\.000 INF listening port=8080/);
    expect(f).toMatch(/21:00:05\.000 403 .* API key revoked/); // refused before verification: why
    expect(selected()).toContain('Killed'); // the newest line, not JSON, shown as raw text
    // Summary: 4 verifications, 3 rejected; per platform; reasons by count.
    expect(f).toMatch(/verify 4 ✗3 75%/);
    expect(f).toMatch(/apple ✗2\/3/);
    expect(f).toMatch(/gms ✗1\/1/);
    expect(f).toMatch(/top reasons: apple_counter_replay 2 · gms_token_stale 1/);
    expect(f).toMatch(/4xx 1/);
    expect(f).toMatch(/1 not JSON/);
    expect(f).toMatch(
      /r rejections +o observed +s service +e reason +a API key +\/ search +c clear/,
    );
    expect(f).toMatch(/↑↓\/jk move/);
  });

  it('moves the selection with arrows, j/k, g and G', async () => {
    const { shows, selected, press } = setup();
    press(KEYS.up);
    await shows(/›.*21:00:05\.000 403/);
    press('k');
    await shows(/›.*21:00:04\.000/);
    press('g');
    await shows(/›.*21:00:00\.000 INF/);
    press('j');
    await shows(/›.*21:00:01\.000/);
    press('G');
    await shows(/›.*Killed/);
    expect(selected()).not.toContain('21:00:01');
  });

  it('scrolls a long list, keeping the selection on screen', async () => {
    const lines = Array.from({ length: 60 }, (_, i) =>
      requestLine({ time: at(i), requestId: `q${i}` }),
    );
    const { frame, shows, press } = setup({ lines });
    expect(frame()).toContain('21:00:59.000');
    expect(frame()).not.toContain('21:00:00.000');
    press('g');
    await shows(/›.*21:00:00\.000/);
    expect(frame()).not.toContain('21:00:59.000');
    press(KEYS.pageDown);
    await shows(/›.*21:00:(1\d|0[5-9])\.000/);
  });

  it('filters with r, s, e, a and /, and c clears them', async () => {
    const { frame, shows, press } = setup();
    press('r');
    await shows('3 shown');
    expect(frame()).toContain('rejected only');
    expect(frame()).not.toContain('21:00:03.000'); // the valid one
    expect(frame()).not.toContain('listening');
    press('s');
    await shows('2 shown');
    expect(frame()).not.toContain('gms_token_stale  ');
    press('s');
    await shows('1 shown');
    expect(frame()).toMatch(/gms +✗ gms_token_stale/);
    press('c');
    await shows('7 shown');
    press('e'); // the most frequent reason first
    await shows('2 shown');
    expect(frame()).toMatch(/e apple_counter_replay/);
    press('c');
    press('a');
    await shows(/a key0000000000001/);
    expect(frame()).toContain('2 shown');
    press('c');
    press('/');
    await shows('search:');
    for (const ch of 'keyid-o') press(ch); // q, k, j... are text while searching
    await shows('2 shown'); // r1 and r4 carry KEYID-ONE: the search ignores case
    press(KEYS.enter);
    await vi.waitFor(() => expect(frame()).not.toContain('search:'), {
      timeout: 10_000,
      interval: 5,
    });
    expect(frame()).toMatch(/\/ "keyid-o"/); // the search stays
    expect(frame()).toMatch(/›.*21:00:04\.000/);
  });

  it('shows the whole record of the selected line on Enter and Tab, and closes on Esc', async () => {
    const { frame, shows, press } = setup();
    press('g');
    press('j'); // the first rejection
    await shows(/›.*21:00:01\.000/);
    press(KEYS.enter);
    await shows('─ record 2 of 7');
    const f = frame();
    expect(f).toMatch(/reason +apple_counter_replay/);
    expect(f).toMatch(/detail +counter 3 is not above the stored 5/);
    expect(f).toMatch(/isValid +false \(rejected\)/);
    expect(f).toMatch(/keyId +KEYID-ONE/);
    expect(f).toMatch(/requestId +r1/);
    expect(f).toContain('J/K scroll the record');
    press('j'); // the pane follows the selection
    await shows(/requestId +r2/);
    expect(frame()).toMatch(/packageName +com\.example/);
    press(KEYS.escape);
    await vi.waitFor(() => expect(frame()).not.toContain('─ record'), {
      timeout: 10_000,
      interval: 5,
    });
    press(KEYS.tab);
    await shows('─ record 3 of 7');
  });

  it('shows lines appended to the store, following the newest unless the user moved away', async () => {
    const { store, frame, shows, press } = setup();
    store.append([requestLine({ time: at(10), requestId: 'late' })]);
    await shows(/›.*21:00:10\.000/);
    press('k');
    await shows(/›.*Killed/);
    store.append([requestLine({ time: at(11) })]);
    await shows('21:00:11.000');
    expect(frame()).toMatch(/›.*Killed/);
  });

  it('shows the summary as a pane of its own on a wide terminal', () => {
    const { frame } = setup({ width: 140, height: 30 });
    const f = frame();
    expect(f).toMatch(/SUMMARY of 7 lines/);
    expect(f).toMatch(/rejected 75\.0% +3/);
    expect(f).toMatch(/apple +2 +3/);
    expect(f).toContain('REJECTED BY REASON');
    expect(f).toMatch(/apple_counter_replay +2 ▇+/);
    expect(f).toMatch(/key0000000000002 +2 +2/);
  });

  it('the rollout: an observed verify is marked in the list with its codes, counted in the summary and filtered by o; the mode is shown', async () => {
    const lines = [
      requestLine({ time: at(1), requestId: 'v1', mode: 'live', keyId: 'KEY-LIVE' }),
      requestLine({
        time: at(2),
        requestId: 'v2',
        mode: 'live',
        observed: ['apple_distribution_not_allowed'],
        keyId: 'KEY-OBSERVED',
      }),
      requestLine({
        time: at(3),
        requestId: 'v3',
        mode: 'test',
        apiKeyId: 'testkey000000001',
        observed: ['apple_distribution_not_allowed', 'apple_risk_exceeded'],
        keyId: 'KEY-MINTED',
      }),
      requestLine({
        time: at(4),
        requestId: 'v4',
        mode: 'live',
        isValid: false,
        reason: 'apple_counter_replay',
      }),
    ];
    // a 160-column terminal: the summary is a pane beside the list
    const { frame, shows, press } = setup({ lines, width: 160, height: 30 });
    const f = frame();
    expect(f).toMatch(/API KEY +MODE/);
    // valid, but failed an observed rule: marked with its code, whole (30 characters)
    expect(f).toMatch(
      /21:00:02\.000 200 .*apple +✓ observed apple_distribution_not_allowed +k3x9a0b1c2d3e4f5 live/,
    );
    expect(f).toMatch(
      /21:00:03\.000 .*✓ observed apple_distribution_not_allowed, a… testkey000000001 test/,
    );
    expect(f).toMatch(/21:00:01\.000 200 .*apple +✓ +k3x9a0b1c2d3e4f5 live/);
    // counted: 2 of the 4 verifications failed an observed rule, 1 was a test key's
    expect(f).toMatch(/observed 50\.0% +2/);
    expect(f).toMatch(/by test keys +1/);
    expect(f).toMatch(/testkey000000001 test/);
    expect(f).toContain('4 lines · 4 shown');

    press('o');
    await shows('4 lines · 2 shown');
    const filtered = frame();
    expect(filtered).toContain('o observed only');
    expect(filtered).toContain('21:00:02.000');
    expect(filtered).toContain('21:00:03.000');
    expect(filtered).not.toContain('21:00:01.000');
    expect(filtered).not.toContain('21:00:04.000');
    press('o');
    await shows('4 lines · 4 shown');
  });

  it('the narrow summary counts the observed verifies and the test keys', () => {
    const { frame } = setup({
      width: 100,
      lines: [
        requestLine({ time: at(1), observed: ['gms_play_protect'], service: 'gms', mode: 'test' }),
        requestLine({ time: at(2), service: 'gms', mode: 'live' }),
      ],
    });
    expect(frame()).toMatch(/observed 1: gms_play_protect 1/);
    expect(frame()).toMatch(/test keys 1/);
  });

  it('fits 80x24: no line wider than the terminal, no more lines than it has', async () => {
    const { frame, shows, press } = setup({
      width: 80,
      height: 23,
      lines: Array.from({ length: 5 }, () => fixture()).flat(),
    });
    const check = () => {
      const rows = frame().split('\n');
      expect(rows.length).toBeLessThanOrEqual(23);
      for (const row of rows) expect(row.length).toBeLessThanOrEqual(80);
    };
    check();
    press('g');
    press('j');
    press(KEYS.enter);
    await shows('─ record');
    check();
    press('r');
    press('e');
    press('a');
    await shows(/e apple_c/); // values are shortened to keep the line within 80 columns
    check();
  });

  it('says why the list is empty', async () => {
    const empty = new LogStore(10, 'app.log');
    const ui = render(
      <LogViewer
        store={empty}
        width={80}
        height={20}
        initialFilter={{ ...NO_FILTER, rejectionsOnly: true }}
      />,
    );
    expect(ui.lastFrame()).toContain('reading…');
    empty.setStatus({ phase: 'following' });
    await vi.waitFor(() => expect(ui.lastFrame()).toContain('waiting for log lines'), {
      timeout: 10_000,
      interval: 5,
    });
    empty.append([requestLine()]);
    await vi.waitFor(
      () => expect(ui.lastFrame()).toContain('no line matches the filters · c clears them'),
      { timeout: 10_000, interval: 5 },
    );
  });

  it('does not let log content drive the terminal', () => {
    const { frame } = setup({
      lines: [
        requestLine({ isValid: false, reason: 'evil\u001b[2J', detail: 'x\u0007' }),
        'raw \u001b]0;title\u0007 line',
      ],
    });
    expect(frame()).not.toMatch(/[\u0000-\u0009\u000b-\u001f]/); // only newlines between rows
    expect(frame()).toContain('evil\\x1B[2J');
  });

  it('quits on q', async () => {
    const { press, onQuit } = setup();
    press('q');
    await vi.waitFor(() => expect(onQuit).toHaveBeenCalledTimes(1), {
      timeout: 10_000,
      interval: 5,
    });
  });
});
