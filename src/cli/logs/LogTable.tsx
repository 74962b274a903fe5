import { Box, Text } from 'ink';
import { clean, fit, formatClock, shortenRoute } from './formatLog.js';
import {
  deviceIdOf,
  isObserved,
  isRequest,
  levelLabel,
  messageLine,
  type LogEntry,
  type LogRecord,
} from './logRecord.js';
import { OBSERVED_PREFIX, type TableColumns } from './viewLayout.js';

/** A piece of a row with its colour; the row is the pieces side by side. */
interface Cell {
  readonly text: string;
  readonly color?: string;
  readonly dim?: boolean;
  readonly bold?: boolean;
}

const statusColor = (status: number | undefined) =>
  status === undefined ? undefined : status >= 500 ? 'red' : status >= 400 ? 'yellow' : 'green';

const levelColor = (level: number | undefined) =>
  level === undefined ? undefined : level >= 50 ? 'red' : level >= 40 ? 'yellow' : 'cyan';

const SERVICE_COLOR: Readonly<Record<string, string>> = { apple: 'cyan', gms: 'magenta' };

/**
 * The REASON column: the rejection's reason code; for a request refused before verification,
 * why the API key was refused; for a failed request, its error.
 */
function whyCell(r: LogRecord, width: number): Cell {
  // valid, but an observed rule failed: what enforcing it would turn away
  if (isObserved(r))
    return {
      text: fit(clean(`${OBSERVED_PREFIX}${(r.observed ?? []).join(', ')}`), width),
      color: 'yellow',
    };
  if (r.reason !== undefined) return { text: fit(clean(r.reason), width), color: 'red' };
  if (r.auth !== undefined)
    return { text: fit(clean(`API key ${r.auth}`), width), color: 'yellow' };
  if (r.errorMessage !== undefined)
    return { text: fit(clean(r.errorMessage), width), color: 'red', dim: true };
  return { text: fit('', width) };
}

/** The cells of one line, each exactly as wide as its column. */
function rowCells(entry: LogEntry, c: TableColumns, withDate: boolean): Cell[] {
  const r = entry.record;
  const gap: Cell = { text: ' ' };
  // Everything after the status column, for lines that are not requests.
  const restWidth =
    c.route +
    c.service +
    c.valid +
    c.reason +
    c.apiKey +
    c.mode +
    5 +
    (c.device > 0 ? c.device + 1 : 0) +
    (c.detail > 0 ? c.detail + 1 : 0);
  if (r === undefined) {
    return [
      { text: fit('', c.time) },
      gap,
      { text: 'raw', dim: true },
      gap,
      { text: fit(clean(entry.raw), restWidth), dim: true },
    ];
  }
  const time: Cell = { text: fit(formatClock(r.timeMs, withDate), c.time), color: 'gray' };
  if (!isRequest(r)) {
    const label = levelLabel(r.level).slice(0, 3).toUpperCase();
    return [
      time,
      gap,
      { text: label, color: levelColor(r.level), bold: true },
      gap,
      { text: fit(clean(messageLine(r)), restWidth) },
    ];
  }
  const valid = r.isValid === undefined ? ' ' : r.isValid ? '✓' : '✗';
  const observed = isObserved(r);
  const cells: Cell[] = [
    time,
    gap,
    {
      text: fit(r.status === undefined ? '' : String(r.status), c.status),
      color: statusColor(r.status),
    },
    gap,
    { text: fit(shortenRoute(clean(r.route ?? ''), c.route), c.route) },
    gap,
    { text: fit(clean(r.service ?? ''), c.service), color: SERVICE_COLOR[r.service ?? ''] },
    gap,
    {
      text: valid,
      color: r.isValid === false ? 'red' : observed ? 'yellow' : 'green',
      bold: true,
    },
    gap,
    whyCell(r, c.reason),
    gap,
    { text: fit(clean(r.apiKeyId ?? ''), c.apiKey), color: 'blue' },
    gap,
    {
      text: fit(c.mode >= 4 ? clean(r.mode ?? '') : r.mode === 'test' ? 'T' : '', c.mode),
      color: r.mode === 'test' ? 'yellow' : undefined,
      dim: r.mode !== 'test',
    },
  ];
  if (c.device > 0) cells.push(gap, { text: fit(clean(deviceIdOf(r) ?? ''), c.device), dim: true });
  if (c.detail > 0) cells.push(gap, { text: fit(clean(r.detail ?? ''), c.detail), dim: true });
  return cells;
}

function headerText(c: TableColumns, withDate: boolean): string {
  const cols = [
    fit(withDate ? 'DATE  TIME UTC' : 'TIME (UTC)', c.time),
    fit('ST', c.status),
    fit('ROUTE', c.route),
    fit('SVC', c.service),
    fit('✓', c.valid),
    fit('REASON', c.reason),
    fit('API KEY', c.apiKey),
    fit(c.mode >= 4 ? 'MODE' : 'M', c.mode),
  ];
  if (c.device > 0) cols.push(fit('KEY ID / PACKAGE', c.device));
  if (c.detail > 0) cols.push(fit('DETAIL', c.detail));
  return ` ${cols.join(' ')}`;
}

/** Props of {@link LogTable}. */
export interface LogTableProps {
  /** The lines on screen, oldest first. */
  readonly rows: readonly LogEntry[];
  /** Index in `rows` of the selected line, or -1. */
  readonly selected: number;
  readonly columns: TableColumns;
  readonly withDate: boolean;
  readonly width: number;
  /** Rows of lines (the column header is extra); short lists are padded so the layout holds still. */
  readonly height: number;
  /** Shown when there is no line. */
  readonly emptyText: string;
}

/** The list of lines: a column header, then one row per line, the selected one highlighted. */
export function LogTable({
  rows,
  selected,
  columns,
  withDate,
  width,
  height,
  emptyText,
}: LogTableProps) {
  const lines = rows.slice(0, height);
  return (
    <Box flexDirection="column" width={width} height={height + 1}>
      <Text bold dimColor wrap="truncate">
        {fit(headerText(columns, withDate), width)}
      </Text>
      {lines.length === 0 ? (
        <Text dimColor wrap="truncate">
          {fit(`  ${emptyText}`, width)}
        </Text>
      ) : (
        lines.map((entry, i) => {
          const cells = rowCells(entry, columns, withDate);
          if (i === selected) {
            // One inverse bar, no per-cell colours: it reads as a selection on any theme.
            const text = `›${cells.map((cell) => cell.text).join('')}`;
            return (
              <Text key={entry.seq} inverse bold wrap="truncate">
                {fit(text, width)}
              </Text>
            );
          }
          return (
            <Text key={entry.seq} wrap="truncate">
              {' '}
              {cells.map((cell, j) => (
                <Text key={j} color={cell.color} dimColor={cell.dim} bold={cell.bold}>
                  {cell.text}
                </Text>
              ))}
            </Text>
          );
        })
      )}
    </Box>
  );
}
