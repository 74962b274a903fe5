import { compileFilter, type LogFilter } from './logFilter.js';
import { formatPlainLine } from './formatLog.js';
import { parseLogLine, type LogEntry } from './logRecord.js';
import type { LineSink } from './logReader.js';
import type { SourcedLine, SourcedSink } from './mergeFiles.js';
import { jsonSafe, type Paint } from '../terminalText.js';

/** Options of {@link PlainPrinter}. */
export interface PlainOptions {
  readonly filter: LogFilter;
  /** Print the matching lines as written (NDJSON); lines that are not JSON are left out. */
  readonly json: boolean;
  /** Of the lines present before the first catch-up, print only the last `tail` matching ones. */
  readonly tail?: number;
  /** Several files are merged: print each line's instance first. */
  readonly instance?: boolean;
  /** Colours for the verdict (a terminal without NO_COLOR). */
  readonly paint?: Paint;
}

/**
 * Prints matching lines to a stream, for when stdout is not a terminal (or `--json`). Holds
 * nothing but the optional tail, waits for `drain` when the stream is full, and treats EPIPE
 * (the reader went away: `| head`) as the end of output rather than a failure.
 */
export class PlainPrinter {
  private readonly matches: (entry: LogEntry) => boolean;
  private held: string[] | undefined;
  private seq = 0;
  private closedByReader = false;
  private failure: Error | undefined;

  /**
   * @param out - where to print (stdout)
   * @param options - filter, format and tail
   * @param onStop - called when printing can no longer go on (EPIPE or another write error); may be called again
   */
  constructor(
    private readonly out: NodeJS.WritableStream,
    private readonly options: PlainOptions,
    private readonly onStop: () => void,
  ) {
    this.matches = compileFilter(options.filter);
    this.held = options.tail === undefined ? undefined : [];
    // Never removed: an EPIPE for lines already handed to the stream can arrive after reading
    // ended, and an 'error' event with no listener would crash the process.
    out.on('error', this.onError);
  }

  /** A write error other than EPIPE, to report after reading stopped. */
  get error(): Error | undefined {
    return this.failure;
  }

  /** The sink to give the reader. */
  readonly sink: LineSink = (lines) =>
    this.take(lines.map((raw) => ({ raw, record: parseLogLine(raw) })));

  /** The sink for lines already parsed and tagged with their file (several files merged). */
  readonly take: SourcedSink = async (lines: SourcedLine[]) => {
    if (this.closedByReader || this.failure !== undefined) return;
    const out: string[] = [];
    for (const line of lines) {
      const entry: LogEntry = { seq: this.seq++, ...line };
      if (!this.matches(entry)) continue;
      if (this.options.json) {
        if (entry.record !== undefined) out.push(jsonSafe(entry.raw));
      } else {
        out.push(
          formatPlainLine(entry, { instance: this.options.instance, paint: this.options.paint }),
        );
      }
    }
    if (this.held !== undefined) {
      this.hold(out);
      return;
    }
    await this.write(out);
  };

  /** The reader caught up with the input: print the held tail and from now on print as lines come. */
  async caughtUp(): Promise<void> {
    if (this.held === undefined) return;
    const tail = this.held.slice(-(this.options.tail ?? 0));
    this.held = undefined;
    await this.write(tail);
  }

  private hold(lines: string[]): void {
    const held = this.held as string[];
    const limit = this.options.tail ?? 0;
    held.push(...lines);
    // Trim in bulk (amortised O(1) per line) instead of shifting one by one.
    if (held.length > 2 * limit + 1024) held.splice(0, held.length - limit);
  }

  private async write(lines: string[]): Promise<void> {
    if (lines.length === 0 || this.closedByReader || this.failure !== undefined) return;
    if (this.out.write(`${lines.join('\n')}\n`)) return;
    await new Promise<void>((resolve) => {
      const done = () => {
        this.out.removeListener('drain', done);
        this.out.removeListener('error', done);
        this.out.removeListener('close', done);
        resolve();
      };
      this.out.once('drain', done);
      this.out.once('error', done);
      this.out.once('close', done);
    });
  }

  private readonly onError = (e: NodeJS.ErrnoException): void => {
    if (e.code === 'EPIPE') this.closedByReader = true;
    else this.failure ??= e;
    this.onStop();
  };
}
