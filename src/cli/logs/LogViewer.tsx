import { Box, Text, useApp, useInput } from 'ink';
import { Fragment, useMemo, useRef, useState } from 'react';
import { DetailPane } from './DetailPane.js';
import { clean, fit, formatCount } from './formatLog.js';
import { compileFilter, isFiltering, NO_FILTER, type LogFilter } from './logFilter.js';
import type { LogEntry } from './logRecord.js';
import type { LogStore, SourceStatus } from './logStore.js';
import { LogTable } from './LogTable.js';
import { SummaryLines, SummarySide } from './SummaryPane.js';
import { useLogStore, useTerminalSize } from './useLogStore.js';
import { computeLayout, tableColumns } from './viewLayout.js';
import { applyKey, cursorOf, initialViewState, topOf, type ViewState } from './viewState.js';

/** Props of {@link LogViewer}. */
export interface LogViewerProps {
  readonly store: LogStore;
  /** The filter to start with (from the command line). */
  readonly initialFilter?: LogFilter;
  /** Size to draw at; defaults to the terminal's (one row short of it, see below). */
  readonly width?: number;
  readonly height?: number;
  /** Re-render at most this often while lines stream in; 0 (the default) on every change. */
  readonly refreshMs?: number;
  /** Called on `q`; defaults to exiting the ink app. */
  readonly onQuit?: () => void;
}

const day = (e: LogEntry | undefined) => {
  const t = e?.record?.timeMs;
  return t === undefined ? undefined : Math.floor(t / 86_400_000);
};

/** Whether the loaded lines span several UTC days (then the time column shows the date too). */
const spansDays = (entries: readonly LogEntry[]) => {
  const first = day(entries.find((e) => e.record?.timeMs !== undefined));
  const last = day(entries.findLast((e) => e.record?.timeMs !== undefined));
  return first !== undefined && last !== undefined && first !== last;
};

const formatBytes = (n: number) =>
  n >= 1 << 30
    ? `${(n / (1 << 30)).toFixed(1)} GiB`
    : n >= 1 << 20
      ? `${(n / (1 << 20)).toFixed(1)} MiB`
      : `${Math.ceil(n / 1024)} KiB`;

function phaseText(status: SourceStatus): { text: string; color: string } {
  switch (status.phase) {
    case 'loading':
      return { text: '◌ loading…', color: 'yellow' };
    case 'following':
      return { text: '● following', color: 'green' };
    case 'done':
      return { text: '■ end of input', color: 'gray' };
    case 'error':
      return { text: `✗ ${status.error ?? 'error'}`, color: 'red' };
  }
}

/**
 * The title line. Takes counts, not the snapshot: React's development build walks changed props
 * to record them, and a snapshot holds every loaded line.
 */
function Header({
  status,
  lines,
  received,
  shown,
  width,
}: {
  status: SourceStatus;
  lines: number;
  received: number;
  shown: number;
  width: number;
}) {
  const phase = phaseText(status);
  const notes: string[] = [];
  if (status.rotations > 0) notes.push(`↻ rotated ${status.rotations}×`);
  if (status.skippedBytes > 0)
    notes.push(`head of file skipped (${formatBytes(status.skippedBytes)})`);
  const problem =
    status.phase !== 'error' && status.error !== undefined ? ` ⚠ ${status.error}` : '';
  const count =
    received > lines
      ? `last ${formatCount(lines)} of ${formatCount(received)} read`
      : `${formatCount(lines)} lines`;
  const right = `${count} · ${formatCount(shown)} shown `;
  const title = ' attest logs';
  const source = `  ${status.source}  `;
  const middle = `${phase.text}${notes.length > 0 ? `  ${notes.join('  ')}` : ''}`;
  const room = Math.max(0, width - title.length - source.length - right.length);
  const mid = fit(middle + problem, room);
  return (
    <Text wrap="truncate">
      <Text bold color="cyan">
        {title}
      </Text>
      <Text bold>{source}</Text>
      <Text color={phase.color}>{mid.slice(0, phase.text.length)}</Text>
      <Text color={problem === '' ? 'gray' : 'red'}>{mid.slice(phase.text.length)}</Text>
      <Text dimColor>{right}</Text>
    </Text>
  );
}

/**
 * The filter line, doubling as help for the filter keys: each key with its name, or with its
 * value (highlighted) when set. Long values are shortened so `c clear` stays on screen.
 */
function FilterLine({ filter, width }: { filter: LogFilter; width: number }) {
  const items = [
    { k: 'r', label: 'rejections', value: filter.rejectionsOnly ? 'rejected only' : undefined },
    { k: 'o', label: 'observed', value: filter.observedOnly ? 'observed only' : undefined },
    { k: 's', label: 'service', value: filter.service },
    { k: 'e', label: 'reason', value: filter.reason },
    { k: 'a', label: 'API key', value: filter.apiKeyId },
    { k: '/', label: 'search', value: filter.search === '' ? undefined : `"${filter.search}"` },
  ];
  const tail = 'c clear';
  const fixed =
    1 +
    tail.length +
    items.reduce(
      (n, it) => n + it.k.length + 3 + (it.value === undefined ? it.label.length : 0),
      0,
    );
  const widths = items.map((it) => it.value?.length ?? 0);
  const total = () => widths.reduce((a, b) => a + b, 0);
  while (total() > width - fixed) {
    const longest = widths.indexOf(Math.max(...widths));
    if ((widths[longest] ?? 0) <= 6) break;
    widths[longest] = (widths[longest] ?? 0) - 1;
  }
  return (
    <Text wrap="truncate">
      {' '}
      {items.map((it, i) => (
        <Fragment key={it.k}>
          <Text bold>{it.k}</Text>
          <Text> </Text>
          {it.value === undefined ? (
            <Text dimColor>{it.label}</Text>
          ) : (
            <Text color="yellow" inverse>
              {fit(clean(it.value), widths[i] ?? 0)}
            </Text>
          )}
          <Text>{'  '}</Text>
        </Fragment>
      ))}
      <Text bold={isFiltering(filter)} dimColor={!isFiltering(filter)}>
        c
      </Text>
      <Text dimColor> clear</Text>
    </Text>
  );
}

function KeyLine({ state }: { state: ViewState }) {
  if (state.searching) {
    return (
      <Text wrap="truncate">
        <Text bold color="yellow">
          {' search: '}
        </Text>
        <Text>{state.filter.search}</Text>
        <Text inverse> </Text>
        <Text dimColor>{'   ⏎ keep  Esc cancel  ^U clear'}</Text>
      </Text>
    );
  }
  const keys = state.detail
    ? '↑↓/jk previous/next line · J/K scroll the record · ⏎/Tab/Esc close · q quit'
    : '↑↓/jk move · PgUp/PgDn page · g/G first/last · ⏎/Tab whole record · q quit';
  return (
    <Text dimColor wrap="truncate">
      {` ${keys}`}
    </Text>
  );
}

/**
 * The `attest logs` screen: a header, the list of lines (newest last), the selected line's whole
 * record (Enter/Tab), a summary of what is loaded, and the filters and keys always on screen.
 * It reads the store through {@link useLogStore} and keeps only view state of its own.
 */
export function LogViewer({
  store,
  initialFilter = NO_FILTER,
  width: w,
  height: h,
  refreshMs = 0,
  onQuit,
}: LogViewerProps) {
  const snap = useLogStore(store, refreshMs);
  const term = useTerminalSize();
  const width = w ?? term.columns;
  // One row short of the terminal: ink clears and redraws the whole screen (flicker) when a
  // frame is as tall as the terminal.
  const height = h ?? Math.max(8, term.rows - 1);
  const [state, setState] = useState(() => initialViewState(initialFilter));
  // Several keys can arrive before React re-renders (key repeat); each must see the previous one's result.
  const latest = useRef(state);
  latest.current = state;
  const { exit } = useApp();

  const matches = useMemo(() => compileFilter(state.filter), [state.filter]);
  const visible = useMemo(() => snap.entries.filter(matches), [snap.entries, matches]);
  const withDate = useMemo(() => spansDays(snap.entries), [snap.entries]);
  const layout = computeLayout(width, height, state.detail);
  const columns = tableColumns(layout.mainWidth, withDate);
  const cursor = cursorOf(state, visible);
  const top = topOf(state, visible, cursor, layout.listRows);

  useInput((input, key) => {
    const ctx = { visible, pageSize: layout.listRows, summary: snap.summary };
    // A burst of typed keys arrives as one string: apply them one by one (a search takes it whole).
    const presses = latest.current.searching || input.length <= 1 ? [input] : [...input];
    let next = latest.current;
    for (const press of presses) {
      const after = applyKey(next, press, key, ctx);
      if (after === 'quit') {
        (onQuit ?? exit)();
        return;
      }
      next = after;
    }
    latest.current = next;
    setState(next);
  });

  const empty =
    snap.entries.length > 0
      ? 'no line matches the filters · c clears them'
      : snap.status.phase === 'loading'
        ? 'reading…'
        : snap.status.phase === 'following'
          ? 'waiting for log lines…'
          : 'the log has no lines';
  return (
    <Box flexDirection="column" width={width} height={height}>
      <Header
        status={snap.status}
        lines={snap.summary.lines}
        received={snap.received}
        shown={visible.length}
        width={width}
      />
      <Box flexDirection="row" height={layout.mainHeight}>
        <Box flexDirection="column" width={layout.mainWidth} height={layout.mainHeight}>
          <LogTable
            rows={visible.slice(top, top + layout.listRows)}
            selected={cursor - top}
            columns={columns}
            withDate={withDate}
            width={layout.mainWidth}
            height={layout.listRows}
            emptyText={empty}
          />
          {state.detail && (
            <DetailPane
              entry={visible[cursor]}
              position={
                cursor < 0 ? '' : `${formatCount(cursor + 1)} of ${formatCount(visible.length)}`
              }
              width={layout.mainWidth}
              height={layout.detailRows}
              scroll={state.detailScroll}
            />
          )}
          {layout.summary === 'bottom' && (
            <SummaryLines
              summary={snap.summary}
              filter={state.filter}
              width={layout.mainWidth}
              height={layout.summaryRows}
            />
          )}
        </Box>
        {layout.summary === 'side' && (
          <Box marginLeft={1}>
            <SummarySide
              summary={snap.summary}
              filter={state.filter}
              width={layout.sideWidth - 1}
              height={layout.mainHeight}
            />
          </Box>
        )}
      </Box>
      <FilterLine filter={state.filter} width={width} />
      <KeyLine state={state} />
    </Box>
  );
}
