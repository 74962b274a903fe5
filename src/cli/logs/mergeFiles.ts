import { open, readdir } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { LineSplitter } from './lineSplitter.js';
import { parseLogLine, type LogEntry } from './logRecord.js';

/** A line with where it came from, parsed once. */
export type SourcedLine = Omit<LogEntry, 'seq'>;

/** Receives merged lines in batches, oldest first; a returned promise holds the reader back. */
export type SourcedSink = (lines: SourcedLine[]) => void | Promise<void>;

const GLOB = /[*?[]/;

function globRegExp(pattern: string): RegExp {
  let re = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === '*') re += '[^/]*';
    else if (c === '?') re += '[^/]';
    else if (c === '[') {
      const end = pattern.indexOf(']', i + 1);
      if (end === -1) re += '\\[';
      else {
        const body = pattern
          .slice(i + 1, end)
          .replace(/^!/, '^')
          .replace(/\\/g, '\\\\');
        re += `[${body}]`;
        i = end;
      }
    } else re += c.replace(/[.+^${}()|\\]/g, '\\$&');
  }
  return new RegExp(`^${re}$`);
}

/**
 * The files named by the arguments: a quoted glob (`'/var/log/attest/*.log'`, as a shell would
 * have expanded it; wildcards in the last path segment only) is expanded in name order.
 * @param args - file paths or globs
 * @returns paths; a glob that matches nothing is returned as is, so the caller reports it
 */
export async function expandFiles(args: readonly string[]): Promise<string[]> {
  const out: string[] = [];
  for (const arg of args) {
    const name = basename(arg);
    if (!GLOB.test(name) || GLOB.test(dirname(arg))) {
      out.push(arg);
      continue;
    }
    const re = globRegExp(name);
    const entries = await readdir(dirname(arg)).catch(() => [] as string[]);
    const matches = entries.filter((e) => re.test(e) && !e.startsWith('.')).sort();
    if (matches.length === 0) out.push(arg);
    for (const m of matches) out.push(join(dirname(arg), m));
  }
  return [...new Set(out)];
}

/** A file's lines, read in chunks (never the whole file at once). */
async function* fileLines(path: string, signal?: AbortSignal): AsyncGenerator<string> {
  const file = await open(path, 'r');
  try {
    const buffer = Buffer.allocUnsafe(64 * 1024);
    const splitter = new LineSplitter();
    let position = 0;
    while (signal?.aborted !== true) {
      const { bytesRead } = await file.read(buffer, 0, buffer.length, position);
      if (bytesRead === 0) break;
      position += bytesRead;
      yield* splitter.push(buffer.subarray(0, bytesRead));
    }
    yield* splitter.flush();
  } finally {
    await file.close().catch(() => undefined);
  }
}

interface Cursor {
  readonly lines: AsyncGenerator<string>;
  readonly source: string;
  head: SourcedLine | undefined;
  /** The time the head sorts by: its own, else that of the file's previous timed line. */
  at: number;
}

/**
 * Reads several log files merged by time, as one: each file is in time order already (one
 * writer each), so a k-way merge holding one line per file keeps memory bounded. A line without
 * a time stays after its file's previous line. Equal times keep the order of the arguments.
 * @param paths - the files
 * @param sink - receives the merged lines
 * @param signal - stops reading
 */
export async function readMergedFiles(
  paths: readonly string[],
  sink: SourcedSink,
  signal?: AbortSignal,
): Promise<void> {
  const cursors: Cursor[] = paths.map((p) => ({
    lines: fileLines(p, signal),
    source: basename(p),
    head: undefined,
    at: Number.NEGATIVE_INFINITY,
  }));
  const advance = async (c: Cursor) => {
    const next = await c.lines.next();
    if (next.done === true) {
      c.head = undefined;
      return;
    }
    const record = parseLogLine(next.value);
    c.head = { raw: next.value, source: c.source, ...(record ? { record } : {}) };
    if (record?.timeMs !== undefined) c.at = record.timeMs;
  };
  try {
    await Promise.all(cursors.map(advance));
    let batch: SourcedLine[] = [];
    while (signal?.aborted !== true) {
      let pick: Cursor | undefined;
      for (const c of cursors)
        if (c.head !== undefined && (pick === undefined || c.at < pick.at)) pick = c;
      if (pick === undefined) break;
      batch.push(pick.head!);
      if (batch.length >= 512) {
        await sink(batch);
        batch = [];
      }
      await advance(pick);
    }
    if (batch.length > 0 && signal?.aborted !== true) await sink(batch);
  } finally {
    await Promise.all(cursors.map((c) => c.lines.return(undefined)));
  }
}
