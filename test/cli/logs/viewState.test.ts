import { describe, expect, it } from 'vitest';
import { NO_FILTER } from '../../../src/cli/logs/logFilter.js';
import { SERVICES } from '../../../src/core/services.js';
import type { LogEntry } from '../../../src/cli/logs/logRecord.js';
import { LogStore } from '../../../src/cli/logs/logStore.js';
import {
  applyKey,
  cursorOf,
  cycle,
  initialViewState,
  topOf,
  type ViewContext,
  type ViewState,
} from '../../../src/cli/logs/viewState.js';
import { requestLine } from './sampleLog.js';

const entries = (seqs: number[]): LogEntry[] => seqs.map((seq) => ({ seq, raw: String(seq) }));
const summary = new LogStore(1).getSnapshot().summary;
const ctx = (visible: LogEntry[], pageSize = 3): ViewContext => ({ visible, pageSize, summary });

/** Applies keys in turn (`{up}`-style names for special keys). */
function press(state: ViewState, c: ViewContext, ...keys: string[]): ViewState {
  let s = state;
  for (const k of keys) {
    const special: Record<string, object> = {
      '{up}': { upArrow: true },
      '{down}': { downArrow: true },
      '{pgup}': { pageUp: true },
      '{pgdn}': { pageDown: true },
      '{enter}': { return: true },
      '{esc}': { escape: true },
      '{bs}': { backspace: true },
    };
    const next = applyKey(s, special[k] ? '' : k, special[k] ?? {}, c);
    if (next === 'quit') throw new Error('quit');
    s = next;
  }
  return s;
}

describe('cursor and scrolling', () => {
  const visible = entries([10, 20, 30, 40, 50, 60]);

  it('starts on the newest line, showing the last page', () => {
    const s = initialViewState();
    expect(cursorOf(s, visible)).toBe(5);
    expect(topOf(s, visible, 5, 3)).toBe(3);
    expect(cursorOf(s, [])).toBe(-1);
  });

  it('moves, pages and jumps, scrolling just enough to keep the selection in view', () => {
    const c = ctx(visible);
    let s = press(initialViewState(), c, '{up}', 'k', 'k');
    expect(cursorOf(s, visible)).toBe(2);
    expect(topOf(s, visible, 2, 3)).toBe(2);
    s = press(s, c, 'j');
    expect(cursorOf(s, visible)).toBe(3);
    expect(topOf(s, visible, 3, 3)).toBe(2); // still in view: no scroll
    s = press(s, c, 'g');
    expect(cursorOf(s, visible)).toBe(0);
    s = press(s, c, '{pgdn}');
    expect(cursorOf(s, visible)).toBe(2);
    s = press(s, c, 'G');
    expect(s.selectedSeq).toBeUndefined(); // back to following the newest line
  });

  it('keeps the selection on the same line as older lines are evicted and new ones arrive', () => {
    const s = press(initialViewState(), ctx(visible), 'k', 'k'); // on seq 40
    const later = entries([30, 40, 50, 60, 70, 80]);
    expect(later[cursorOf(s, later)]?.seq).toBe(40);
  });

  it('falls on the next line when the selected one is filtered out or evicted', () => {
    const s: ViewState = { ...initialViewState(), selectedSeq: 25 };
    expect(cursorOf(s, visible)).toBe(2);
    expect(cursorOf({ ...s, selectedSeq: 99 }, visible)).toBe(5);
  });
});

describe('filters', () => {
  it('cycles none → each value → none, both ways', () => {
    expect(cycle(undefined, ['a', 'b'], 1)).toBe('a');
    expect(cycle('a', ['a', 'b'], 1)).toBe('b');
    expect(cycle('b', ['a', 'b'], 1)).toBeUndefined();
    expect(cycle(undefined, ['a', 'b'], -1)).toBe('b');
    expect(cycle('a', ['a', 'b'], -1)).toBeUndefined();
    expect(cycle(undefined, [], 1)).toBeUndefined();
  });

  it('cycles reasons and API keys in order of frequency, and services apple then gms', () => {
    const store = new LogStore(10);
    store.append([
      requestLine({ isValid: false, reason: 'rare', apiKeyId: 'k2' }),
      requestLine({ isValid: false, reason: 'common', apiKeyId: 'k1' }),
      requestLine({ isValid: false, reason: 'common', apiKeyId: 'k1' }),
    ]);
    const c: ViewContext = { visible: [], pageSize: 3, summary: store.getSnapshot().summary };
    expect(press(initialViewState(), c, 'e').filter.reason).toBe('common');
    expect(press(initialViewState(), c, 'e', 'e').filter.reason).toBe('rare');
    expect(press(initialViewState(), c, 'E').filter.reason).toBe('rare');
    expect(press(initialViewState(), c, 'a').filter.apiKeyId).toBe('k1');
    // 's' walks the services in the registry's order, then back to none
    expect(SERVICES.slice(0, 2)).toEqual(['apple', 'gms']);
    SERVICES.forEach((service, i) =>
      expect(press(initialViewState(), c, ...Array<string>(i + 1).fill('s')).filter.service).toBe(
        service,
      ),
    );
    expect(
      press(initialViewState(), c, ...Array<string>(SERVICES.length + 1).fill('s')).filter.service,
    ).toBeUndefined();
    const all = press(initialViewState(), c, 'r', 'e', 's');
    expect(all.filter).toMatchObject({ rejectionsOnly: true, reason: 'common', service: 'apple' });
    expect(press(all, c, 'c').filter).toEqual(NO_FILTER);
  });

  it('edits a search live; Enter keeps it, Esc restores the one before', () => {
    const c = ctx([]);
    let s = press(initialViewState({ ...NO_FILTER, search: 'old' }), c, '/');
    expect(s.searching).toBe(true);
    s = press(s, c, '{bs}', '{bs}', '{bs}', 'k', 'i', 'd', 'q'); // q and k are text here, not keys
    expect(s.filter.search).toBe('kidq');
    expect(press(s, c, '{enter}')).toMatchObject({ searching: false, filter: { search: 'kidq' } });
    expect(press(s, c, '{esc}')).toMatchObject({ searching: false, filter: { search: 'old' } });
  });

  it('takes pasted text and Enter arriving in one chunk as text, then Enter', () => {
    const c = ctx([]);
    const open = press(initialViewState(), c, '/');
    for (const chunk of ['KEYID-ONE\r', 'KEYID-ONE\n', 'KEYID-ONE\r\n'])
      expect(press(open, c, chunk)).toMatchObject({
        searching: false,
        filter: { search: 'KEYID-ONE' },
      });
    // a line break inside the paste is a space; only a trailing one is Enter
    expect(press(open, c, 'a\nb')).toMatchObject({ searching: true, filter: { search: 'a b' } });
    expect(press(open, c, 'a\nb\r')).toMatchObject({ searching: false, filter: { search: 'a b' } });
  });
});

describe('other keys', () => {
  it('toggles the detail pane and scrolls it', () => {
    const c = ctx(entries([1, 2]));
    let s = press(initialViewState(), c, '{enter}');
    expect(s.detail).toBe(true);
    s = press(s, c, 'J', 'J', 'K');
    expect(s.detailScroll).toBe(1);
    expect(press(s, c, '{esc}').detail).toBe(false);
  });

  it('quits on q and Ctrl-C', () => {
    expect(applyKey(initialViewState(), 'q', {}, ctx([]))).toBe('quit');
    expect(applyKey(initialViewState(), 'c', { ctrl: true }, ctx([]))).toBe('quit');
  });
});
