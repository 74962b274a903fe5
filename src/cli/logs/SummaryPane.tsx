import { Box, Text } from 'ink';
import { clean, fit, formatCount } from './formatLog.js';
import type { LogFilter } from './logFilter.js';
import type { LogSummary, VerifyCounts } from './logStore.js';

const percent = (part: number, whole: number) =>
  whole === 0 ? '' : `${((100 * part) / whole).toFixed(1)}%`;

/** A text piece of a summary line. */
interface Piece {
  readonly text: string;
  readonly color?: string;
  readonly bold?: boolean;
  readonly dim?: boolean;
  readonly inverse?: boolean;
}

/** One line of pieces, padded to `width`. Names come from the log, so control characters are neutralised here. */
function Line({ pieces, width }: { pieces: readonly Piece[]; width: number }) {
  return (
    <Text wrap="truncate">
      {pieces.map((p, i) => (
        <Text key={i} color={p.color} bold={p.bold} dimColor={p.dim} inverse={p.inverse}>
          {clean(p.text)}
        </Text>
      ))}
      {' '.repeat(Math.max(0, width - pieces.reduce((n, p) => n + p.text.length, 0)))}
    </Text>
  );
}

/** Puts as many `name count` items on a line as fit, then `+N more`. */
function packed(
  label: string,
  items: readonly { name: string; count: number; active: boolean }[],
  width: number,
): Piece[] {
  const pieces: Piece[] = [{ text: label, dim: true }];
  let used = label.length;
  for (let i = 0; i < items.length; i++) {
    const item = items[i] as (typeof items)[number];
    const text = `${item.name} ${formatCount(item.count)}`;
    const sep = i === 0 ? '' : ' · ';
    const left = items.length - i;
    const moreText = ` · +${left} more`;
    if (used + sep.length + text.length + (left > 1 ? moreText.length : 0) > width) {
      pieces.push({ text: moreText.slice(i === 0 ? 3 : 0), dim: true });
      return pieces;
    }
    pieces.push({ text: sep, dim: true }, { text, color: 'red', inverse: item.active });
    used += sep.length + text.length;
  }
  if (items.length === 0) pieces.push({ text: 'none', dim: true });
  return pieces;
}

/** Props of the summary views. */
export interface SummaryProps {
  readonly summary: LogSummary;
  readonly filter: LogFilter;
  readonly width: number;
  readonly height: number;
}

/** The totals line: verifications, rejected share, per platform, HTTP errors. */
function totalsPieces(s: LogSummary, filter: LogFilter): Piece[] {
  const pieces: Piece[] = [
    { text: ' verify ', dim: true },
    { text: formatCount(s.verifications), bold: true },
    { text: ` ✗${formatCount(s.rejected)}`, color: 'red', bold: true },
    {
      text: s.verifications > 0 ? ` ${Math.round((100 * s.rejected) / s.verifications)}%` : '',
      color: 'red',
    },
  ];
  for (const svc of s.services) {
    pieces.push(
      { text: ' │ ', dim: true },
      { text: svc.name, bold: true, inverse: filter.service === svc.name },
      { text: ` ✗${formatCount(svc.rejected)}`, color: 'red' },
      { text: `/${formatCount(svc.total)}`, dim: true },
    );
  }
  // result-token consumes apart: they are not verifications
  if (s.consumes > 0)
    pieces.push(
      { text: ' │ consume ', dim: true },
      { text: formatCount(s.consumes) },
      { text: ` ✗${formatCount(s.consumesRefused)}`, color: 'red' },
    );
  if (s.observedVerifications > 0)
    pieces.push(
      { text: ' │ ', dim: true },
      {
        text: `observed ${formatCount(s.observedVerifications)}`,
        color: 'yellow',
        bold: true,
        inverse: filter.observedOnly === true,
      },
      {
        text: `: ${s.observed.map((o) => `${o.name} ${formatCount(o.count)}`).join(', ')}`,
        color: 'yellow',
      },
    );
  if (s.testVerifications > 0)
    pieces.push(
      { text: ' │ ', dim: true },
      { text: `test keys ${formatCount(s.testVerifications)}`, color: 'yellow' },
    );
  if (s.clientErrors > 0)
    pieces.push(
      { text: ' │ ', dim: true },
      { text: `4xx ${formatCount(s.clientErrors)}`, color: 'yellow' },
    );
  if (s.serverErrors > 0)
    pieces.push(
      { text: ' │ ', dim: true },
      { text: `5xx ${formatCount(s.serverErrors)}`, color: 'red' },
    );
  if (s.unparsed > 0) pieces.push({ text: ` │ ${formatCount(s.unparsed)} not JSON`, dim: true });
  return pieces;
}

/** The summary as two or three lines under the list, for narrow terminals. */
export function SummaryLines({ summary, filter, width, height }: SummaryProps) {
  const reasons = summary.reasons.map((r) => ({ ...r, active: r.name === filter.reason }));
  const keys = summary.apiKeys.map((k) => ({
    name: k.mode === 'test' ? `${k.name} (test)` : k.name,
    count: k.total,
    active: k.name === filter.apiKeyId,
  }));
  const lines = [totalsPieces(summary, filter), packed(' top reasons: ', reasons, width)];
  if (height >= 3) lines.push(packed(' API keys: ', keys, width));
  return (
    <Box flexDirection="column" width={width} height={height + 1}>
      <Text dimColor wrap="truncate">
        {'─ summary of what is loaded '.padEnd(width, '─')}
      </Text>
      {lines.slice(0, height).map((pieces, i) => (
        <Line key={i} pieces={pieces} width={width} />
      ))}
    </Box>
  );
}

function countsRows(
  title: string,
  rows: readonly VerifyCounts[],
  active: string | undefined,
  width: number,
  max: number,
): Piece[][] {
  if (rows.length === 0 || max < 2) return [];
  const nameWidth = width - 14;
  const out: Piece[][] = [
    [
      { text: fit(title, nameWidth), bold: true },
      { text: '   rej   total', dim: true },
    ],
  ];
  const shown = rows.length > max - 1 ? rows.slice(0, max - 2) : rows;
  for (const r of shown) {
    out.push([
      {
        text: fit(r.mode === 'test' ? `${r.name} test` : r.name, nameWidth),
        inverse: r.name === active,
      },
      {
        text: fit(formatCount(r.rejected), 6, 'right'),
        color: r.rejected > 0 ? 'red' : undefined,
        dim: r.rejected === 0,
      },
      { text: fit(formatCount(r.total), 8, 'right') },
    ]);
  }
  if (shown.length < rows.length)
    out.push([{ text: `+${rows.length - shown.length} more`, dim: true }]);
  return out;
}

/** The summary as a pane on the right, for wide terminals: totals, platforms, reasons with bars, API keys. */
export function SummarySide({ summary: s, filter, width, height }: SummaryProps) {
  const inner = width - 2; // the border and the space after it
  const num = (n: number) => fit(formatCount(n), 8, 'right');
  const label = (t: string) => fit(t, inner - 8);
  const lines: Piece[][] = [
    [
      { text: 'SUMMARY', bold: true },
      { text: ` of ${formatCount(s.lines)} lines`, dim: true },
    ],
    [{ text: label('requests') }, { text: num(s.requests) }],
    [{ text: label('verifications') }, { text: num(s.verifications) }],
    [
      { text: label('  valid'), color: 'green' },
      { text: num(s.verifications - s.rejected), color: 'green' },
    ],
    [
      {
        text: fit(`  rejected ${percent(s.rejected, s.verifications)}`, inner - 8),
        color: 'red',
        bold: true,
      },
      { text: num(s.rejected), color: 'red', bold: true },
    ],
  ];
  // valid, but failed an observed rule: what enforcing it would turn away
  if (s.observedVerifications > 0)
    lines.push([
      {
        text: label(`  observed ${percent(s.observedVerifications, s.verifications)}`),
        color: 'yellow',
        inverse: filter.observedOnly === true,
      },
      { text: num(s.observedVerifications), color: 'yellow' },
    ]);
  if (s.testVerifications > 0)
    lines.push([
      { text: label('  by test keys'), color: 'yellow' },
      { text: num(s.testVerifications), color: 'yellow' },
    ]);
  if (s.clientErrors > 0)
    lines.push([
      { text: label('HTTP 4xx'), color: 'yellow' },
      { text: num(s.clientErrors), color: 'yellow' },
    ]);
  if (s.serverErrors > 0)
    lines.push([
      { text: label('HTTP 5xx'), color: 'red' },
      { text: num(s.serverErrors), color: 'red' },
    ]);
  if (s.unparsed > 0)
    lines.push([
      { text: label('not JSON'), dim: true },
      { text: num(s.unparsed), dim: true },
    ]);
  lines.push([], ...countsRows('PLATFORM', s.services, filter.service, inner, 5));

  // Reasons take the room left after a short API key section.
  const keyRows = Math.min(s.apiKeys.length === 0 ? 0 : s.apiKeys.length + 2, 6);
  const reasonRoom = Math.max(0, height - lines.length - keyRows - 2);
  if (s.reasons.length > 0 && reasonRoom >= 2) {
    lines.push([], [{ text: 'REJECTED BY REASON', bold: true }]);
    const top = s.reasons[0]?.count ?? 1;
    const shown = s.reasons.length > reasonRoom ? s.reasons.slice(0, reasonRoom - 1) : s.reasons;
    const nameWidth = inner - 10;
    for (const r of shown) {
      const bar = '▇'.repeat(Math.max(1, Math.round((3 * r.count) / top)));
      lines.push([
        { text: fit(r.name, nameWidth), color: 'red', inverse: r.name === filter.reason },
        { text: fit(formatCount(r.count), 6, 'right') },
        { text: ` ${bar}`, color: 'red', dim: true },
      ]);
    }
    if (shown.length < s.reasons.length)
      lines.push([{ text: `+${s.reasons.length - shown.length} more (e cycles)`, dim: true }]);
  }
  if (keyRows > 0)
    lines.push([], ...countsRows('API KEY', s.apiKeys, filter.apiKeyId, inner, keyRows - 1));
  return (
    <Box
      flexDirection="column"
      width={width}
      height={height}
      borderStyle="single"
      borderTop={false}
      borderBottom={false}
      borderRight={false}
      borderDimColor
      paddingLeft={1}
    >
      {lines.slice(0, height).map((pieces, i) => (
        <Line key={i} pieces={pieces} width={inner} />
      ))}
    </Box>
  );
}
