import { describe, expect, it } from 'vitest';
import { parseLogLine } from '../../../src/cli/logs/logRecord.js';
import { clean } from '../../../src/cli/logs/formatLog.js';
import {
  computeLayout,
  detailLines,
  tableColumns,
  wrapText,
} from '../../../src/cli/logs/viewLayout.js';
import { plainLine, requestLine } from './sampleLog.js';

const used = (c: ReturnType<typeof tableColumns>) =>
  1 +
  c.time +
  c.status +
  c.route +
  c.service +
  c.valid +
  c.reason +
  c.apiKey +
  c.mode +
  7 +
  (c.device > 0 ? c.device + 1 : 0) +
  (c.detail > 0 ? c.detail + 1 : 0);

describe('computeLayout', () => {
  it('puts the summary under the list when narrow and beside it when wide', () => {
    expect(computeLayout(80, 23, false)).toMatchObject({
      summary: 'bottom',
      mainWidth: 80,
      summaryRows: 2,
      listRows: 16,
    });
    expect(computeLayout(120, 34, false)).toMatchObject({
      summary: 'side',
      sideWidth: 42,
      mainWidth: 78,
      listRows: 30,
    });
  });

  it('gives the detail pane most of the room and keeps a few lines of context', () => {
    for (const [w, h] of [
      [80, 23],
      [120, 34],
      [200, 60],
    ] as const) {
      const l = computeLayout(w, h, true);
      expect(l.listRows).toBeGreaterThanOrEqual(3);
      expect(l.detailRows).toBeGreaterThan(l.listRows);
      // header + column header + list + detail title + detail + two footer lines = the height
      expect(3 + 1 + l.listRows + 1 + l.detailRows).toBe(h);
    }
    expect(computeLayout(80, 23, true).summary).toBe('none');
  });
});

describe('tableColumns', () => {
  it('never overflows, and the columns share the whole width', () => {
    // Narrow: squeezed to fit exactly. Wide: the last text column takes what is left.
    for (let width = 77; width <= 240; width++) {
      expect(used(tableColumns(width, false)), String(width)).toBe(width);
      expect(used(tableColumns(width, true)), String(width)).toBe(width);
    }
    // In between, every column has all it can use and the optional ones do not fit yet: the
    // reason column takes the rest (an observed verify lists its codes there)
    for (const width of [116, 123]) {
      expect(tableColumns(width, false)).toMatchObject({ apiKey: 16, mode: 4, device: 0 });
      expect(tableColumns(width, false).route).toBeGreaterThanOrEqual(20); // …/attestation/verify
      expect(tableColumns(width, false).reason).toBeGreaterThanOrEqual(35);
    }
  });

  it('the longest reason code is whole on a 160-column terminal (the list beside the summary pane)', () => {
    const longest = 'android_security_level_insufficient';
    const { mainWidth } = computeLayout(160, 40, false);
    expect(tableColumns(mainWidth, false).reason).toBeGreaterThanOrEqual(longest.length);
    // and an observed one after its word
    expect(tableColumns(mainWidth, false).reason).toBeGreaterThanOrEqual(
      'observed apple_distribution_not_allowed'.length,
    );
  });

  it('keeps every service name whole', () => {
    for (const width of [77, 80, 120]) expect(tableColumns(width, false).service).toBe(11);
  });

  it('keeps the common reason codes whole at 80 columns, and adds the device column only when it is useful', () => {
    const narrow = tableColumns(78, false);
    expect(narrow.reason).toBeGreaterThanOrEqual('gms_integrity_insufficient'.length);
    expect(narrow.device).toBe(0);
    expect(narrow.mode).toBe(1); // `T` for a test key
    expect(tableColumns(150, false)).toMatchObject({ device: 24, detail: 0 });
    expect(tableColumns(163, false)).toMatchObject({
      route: 26,
      reason: 44,
      apiKey: 16,
      mode: 4,
      device: 37,
      detail: 0,
    });
  });
});

describe('text shaping', () => {
  it('wraps at spaces and breaks long words', () => {
    expect(wrapText('counter 3 is not above the stored 5', 12)).toEqual([
      'counter 3 is',
      'not above',
      'the stored 5',
    ]);
    expect(wrapText('AAAAAAAAAAAAAAAAAAAA', 8)).toEqual(['AAAAAAAA', 'AAAAAAAA', 'AAAA']);
  });

  it('neutralises control characters from the log', () => {
    expect(clean('red \u001b[31mtext\u0007')).toBe('red \\x1B[31mtext\\x07');
  });

  it('lists a request record with the why first and pino fields last', () => {
    const raw = requestLine({
      isValid: false,
      reason: 'apple_counter_replay',
      detail: 'counter 3',
      keyId: 'K',
    });
    const keys = detailLines({ seq: 0, raw, record: parseLogLine(raw) }, 80)
      .map((l) => l.key)
      .filter((k) => k !== '');
    expect(keys.slice(0, 9)).toEqual([
      'time',
      'status',
      'method',
      'route',
      'service',
      'approach',
      'isValid',
      'reason',
      'detail',
    ]);
    expect(keys.slice(-4)).toEqual(['level', 'pid', 'hostname', 'msg']);
  });

  it('flattens an error object and shows a line that is not JSON as it is', () => {
    const raw = plainLine(50, 'boom', { err: { type: 'Error', message: 'bad' } });
    const lines = detailLines({ seq: 0, raw, record: parseLogLine(raw) }, 80);
    expect(lines.map((l) => `${l.key}=${l.value}`)).toEqual(
      expect.arrayContaining(['level=50 (error)', 'msg=boom', 'err.type=Error', 'err.message=bad']),
    );
    expect(detailLines({ seq: 0, raw: 'Killed' }, 80)).toEqual([
      { key: 'not JSON', value: 'Killed', tone: 'dim' },
    ]);
  });
});
