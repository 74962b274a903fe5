import { SERVICES } from '../../core/services.js';
import { NO_FILTER, type LogFilter } from './logFilter.js';
import type { LogEntry } from './logRecord.js';
import type { LogSummary } from './logStore.js';

/**
 * The viewer's own state, kept apart from the lines: pure data and pure transitions, so key
 * handling is tested without rendering. Positions are kept as line `seq` numbers, not indexes,
 * so the selection stays on the same line while the ring buffer evicts and filters change.
 */
export interface ViewState {
  readonly filter: LogFilter;
  /** The selected line; absent: the newest line, following new arrivals (like `less +F`). */
  readonly selectedSeq?: number;
  /** The first line shown. */
  readonly topSeq?: number;
  readonly detail: boolean;
  /** Lines of the detail pane scrolled past. */
  readonly detailScroll: number;
  /** Typing a search (`/`); `searchBefore` is restored by Esc. */
  readonly searching: boolean;
  readonly searchBefore: string;
}

/** The key flags the viewer reacts to; ink's `Key` fits it. */
export interface KeyPress {
  readonly upArrow?: boolean;
  readonly downArrow?: boolean;
  readonly pageUp?: boolean;
  readonly pageDown?: boolean;
  readonly home?: boolean;
  readonly end?: boolean;
  readonly return?: boolean;
  readonly escape?: boolean;
  readonly tab?: boolean;
  readonly backspace?: boolean;
  readonly delete?: boolean;
  readonly ctrl?: boolean;
  readonly meta?: boolean;
}

/** What a key acts on besides the state. */
export interface ViewContext {
  /** The lines that pass the filter, oldest first. */
  readonly visible: readonly LogEntry[];
  /** Rows of the list. */
  readonly pageSize: number;
  /** Where the filters cycle through: the values present in what is loaded. */
  readonly summary: LogSummary;
}

/**
 * The initial state.
 * @param filter - the filter the command line asked for
 */
export const initialViewState = (filter: LogFilter = NO_FILTER): ViewState => ({
  filter,
  detail: false,
  detailScroll: 0,
  searching: false,
  searchBefore: filter.search,
});

/**
 * Index of the first visible line whose seq is at least `seq` (visible lines are in seq order).
 * @param visible - the lines
 * @param seq - the seq looked for
 */
export function lowerBound(visible: readonly LogEntry[], seq: number): number {
  let lo = 0;
  let hi = visible.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((visible[mid] as LogEntry).seq < seq) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * The selected index: the selected line, or the next one when it was filtered out or evicted,
 * or the newest; -1 when nothing is visible.
 */
export function cursorOf(state: ViewState, visible: readonly LogEntry[]): number {
  if (visible.length === 0) return -1;
  if (state.selectedSeq === undefined) return visible.length - 1;
  return Math.min(lowerBound(visible, state.selectedSeq), visible.length - 1);
}

/**
 * The first shown index: where the list was, moved just enough to show the cursor, and never
 * leaving empty rows at the bottom while there are lines above.
 */
export function topOf(
  state: ViewState,
  visible: readonly LogEntry[],
  cursor: number,
  pageSize: number,
): number {
  const page = Math.max(1, pageSize);
  let top = state.topSeq === undefined ? 0 : lowerBound(visible, state.topSeq);
  top = Math.min(top, Math.max(0, visible.length - page));
  top = Math.max(top, cursor - page + 1);
  top = Math.min(top, cursor);
  return Math.max(0, top);
}

/**
 * The next value of a cycling filter: none → first → … → last → none (`dir` -1 goes backwards).
 * @param current - the value now
 * @param options - the values to go through
 * @param dir - direction
 */
export function cycle(
  current: string | undefined,
  options: readonly string[],
  dir: 1 | -1,
): string | undefined {
  if (options.length === 0) return undefined;
  const i = current === undefined ? -1 : options.indexOf(current);
  if (dir === 1) return i + 1 < options.length ? options[i + 1] : undefined;
  if (i === -1) return options[options.length - 1];
  return i === 0 ? undefined : options[i - 1];
}

/** The platforms the service filter cycles through: the two known ones and any other seen. */
const serviceOptions = (summary: LogSummary): string[] => [
  ...new Set([...SERVICES, ...summary.services.map((s) => s.name).filter((n) => n !== 'unknown')]),
];

function select(state: ViewState, ctx: ViewContext, index: number): ViewState {
  const { visible, pageSize } = ctx;
  if (visible.length === 0) return state;
  const i = Math.max(0, Math.min(index, visible.length - 1));
  const cursor = cursorOf(state, visible);
  // Landing on the newest line resumes following; anywhere else pins the selection.
  const selectedSeq = i === visible.length - 1 ? undefined : (visible[i] as LogEntry).seq;
  // Scroll from where the list is shown now, just enough to keep the new selection in view.
  const shownTop = (visible[topOf(state, visible, cursor, pageSize)] as LogEntry).seq;
  const top = topOf({ ...state, topSeq: shownTop }, visible, i, pageSize);
  return {
    ...state,
    selectedSeq,
    topSeq: (visible[top] as LogEntry).seq,
    detailScroll: i === cursor ? state.detailScroll : 0,
  };
}

const withFilter = (state: ViewState, patch: Partial<LogFilter>): ViewState => ({
  ...state,
  filter: { ...state.filter, ...patch },
});

/**
 * Applies one key press.
 * @param state - the state before
 * @param input - the text of the key (`j`, `/`), '' for special keys
 * @param key - the special-key flags
 * @param ctx - the visible lines, page size and summary
 * @returns the state after, or `quit`
 */
export function applyKey(
  state: ViewState,
  input: string,
  key: KeyPress,
  ctx: ViewContext,
): ViewState | 'quit' {
  if (key.ctrl === true && input === 'c') return 'quit';
  if (state.searching) return applySearchKey(state, input, key);

  const cursor = cursorOf(state, ctx.visible);
  const page = Math.max(1, ctx.pageSize - 1);
  if (key.upArrow === true || input === 'k') return select(state, ctx, cursor - 1);
  if (key.downArrow === true || input === 'j') return select(state, ctx, cursor + 1);
  if (key.pageUp === true || (key.ctrl === true && (input === 'b' || input === 'u')))
    return select(state, ctx, cursor - page);
  if (
    key.pageDown === true ||
    input === ' ' ||
    (key.ctrl === true && (input === 'f' || input === 'd'))
  )
    return select(state, ctx, cursor + page);
  if (key.home === true || input === 'g') return select(state, ctx, 0);
  if (key.end === true || input === 'G') return select(state, ctx, ctx.visible.length - 1);
  if (key.return === true || key.tab === true)
    return { ...state, detail: !state.detail, detailScroll: 0 };
  if (key.escape === true) return { ...state, detail: false, detailScroll: 0 };
  if (key.ctrl === true || key.meta === true) return state;

  switch (input) {
    case 'q':
      return 'quit';
    case 'J':
      return state.detail ? { ...state, detailScroll: state.detailScroll + 1 } : state;
    case 'K':
      return state.detail ? { ...state, detailScroll: Math.max(0, state.detailScroll - 1) } : state;
    case 'r':
      return withFilter(state, { rejectionsOnly: !state.filter.rejectionsOnly });
    case 'o':
      return withFilter(state, { observedOnly: state.filter.observedOnly !== true });
    case 's':
      return withFilter(state, {
        service: cycle(state.filter.service, serviceOptions(ctx.summary), 1),
      });
    case 'e':
    case 'E': {
      const reasons = ctx.summary.reasons.map((r) => r.name);
      return withFilter(state, {
        reason: cycle(state.filter.reason, reasons, input === 'e' ? 1 : -1),
      });
    }
    case 'a':
    case 'A': {
      const keys = ctx.summary.apiKeys.map((k) => k.name);
      return withFilter(state, {
        apiKeyId: cycle(state.filter.apiKeyId, keys, input === 'a' ? 1 : -1),
      });
    }
    case '/':
      return { ...state, searching: true, searchBefore: state.filter.search };
    case 'c':
      return { ...state, filter: NO_FILTER };
    default:
      return state;
  }
}

function applySearchKey(state: ViewState, input: string, key: KeyPress): ViewState {
  if (key.return === true) return { ...state, searching: false };
  if (key.escape === true)
    return { ...withFilter(state, { search: state.searchBefore }), searching: false };
  if (key.backspace === true || key.delete === true)
    return withFilter(state, { search: state.filter.search.slice(0, -1) });
  if (key.ctrl === true && input === 'u') return withFilter(state, { search: '' });
  if (key.ctrl === true || key.meta === true || input === '') return state;
  // Pasted text arrives as one input; keep it to one line. Text and Enter pasted together (one
  // chunk ending in a line break, which the terminal does not report as the Enter key) end the
  // search as Enter would.
  const entered = /[\r\n]+$/.exec(input);
  const text = (entered ? input.slice(0, entered.index) : input).replace(/[\r\n\t]/g, ' ');
  const next = withFilter(state, { search: state.filter.search + text });
  return entered ? { ...next, searching: false } : next;
}
