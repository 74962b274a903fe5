import { jsonSafe, safeText } from './terminalText.js';

/** Prints a value as JSON (one document) on stdout, with no C1, bidi or separator character raw. */
export function printJson(value: unknown): void {
  process.stdout.write(`${jsonSafe(JSON.stringify(value, null, 2))}\n`);
}

/** Prints rows as an aligned text table with a header; cells hold stored text, so each is escaped. */
export function printTable(headers: string[], unsafeRows: string[][]): void {
  const rows = unsafeRows.map((r) => r.map(safeText));
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join('  ');
  process.stdout.write(`${[line(headers), ...rows.map(line)].join('\n')}\n`);
}

/** A date for tables: ISO to the second, or a dash. */
export function when(date: Date | null | undefined): string {
  return date ? `${date.toISOString().slice(0, 19)}Z` : '-';
}
