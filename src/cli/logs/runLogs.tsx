import { openSync } from 'node:fs';
import { basename } from 'node:path';
import { ReadStream } from 'node:tty';
import { render } from 'ink';
import { colorWanted } from '../../config.js';
import { runtimeError, usageError } from '../errors.js';
import { paint } from '../terminalText.js';
import type { LogFilter } from './logFilter.js';
import { readLogFile, readLogStream, type LineSink, type ReaderEvent } from './logReader.js';
import { DEFAULT_LIMIT, LogStore } from './logStore.js';
import { LogViewer } from './LogViewer.js';
import { readMergedFiles, type SourcedSink } from './mergeFiles.js';
import { PlainPrinter } from './plainOutput.js';

/** What `attest logs` was asked to do, validated by the command. */
export interface LogsOptions {
  /** The log file; absent: stdin (or `files`). */
  readonly file?: string;
  /** Several log files, merged by time (never followed). */
  readonly files?: readonly string[];
  readonly follow: boolean;
  /** NDJSON of the matching lines instead of the viewer or human lines. */
  readonly json: boolean;
  /** Viewer: lines kept (default 10 000). Plain output: print only the last N matching lines present at start. */
  readonly limit?: number;
  readonly filter: LogFilter;
  /** Follow poll interval (tests shorten it). */
  readonly pollMs?: number;
}

/** The process streams, replaceable in tests. */
export interface LogsIo {
  readonly stdin: NodeJS.ReadStream;
  readonly stdout: NodeJS.WriteStream;
  /** A terminal to read keys from when stdin carries the log; `undefined` when there is none. */
  readonly openKeyboard: () => NodeJS.ReadStream | undefined;
}

/** Opens the controlling terminal for key input, as `less` and `fzf` do when their stdin is a pipe. */
function openDevTty(): NodeJS.ReadStream | undefined {
  try {
    return new ReadStream(openSync('/dev/tty', 'r'));
  } catch {
    return undefined; // no controlling terminal (CI, cron, a container without -t)
  }
}

/** The real process streams. */
export const processIo = (): LogsIo => ({
  stdin: process.stdin,
  stdout: process.stdout,
  openKeyboard: openDevTty,
});

/**
 * Reads the log into `sink`: the file (following it if asked), several files merged by time
 * (into `sourced`), or stdin.
 * @param onStdinCaughtUp - viewer only: stdin has no more data buffered for now (it may go on)
 * @returns a promise that resolves at the end of input, or when `signal` aborts while following
 */
function readSource(
  options: LogsOptions,
  io: LogsIo,
  sink: LineSink,
  sourced: SourcedSink,
  signal: AbortSignal,
  onEvent: (e: ReaderEvent) => void,
  tailBytes?: number,
  onStdinCaughtUp?: () => void,
): Promise<void> {
  if (options.files !== undefined) {
    return readMergedFiles(options.files, sourced, signal).then(() =>
      onEvent({ type: 'caught-up' }),
    );
  }
  if (options.file === undefined) {
    // stdin cannot be rotated or re-read: it is read to its end, which is following it anyway.
    return readLogStream(io.stdin, sink, signal, onStdinCaughtUp).then(() =>
      onEvent({ type: 'caught-up' }),
    );
  }
  return readLogFile(options.file, sink, {
    follow: options.follow,
    signal,
    onEvent,
    tailBytes,
    pollMs: options.pollMs,
  });
}

/**
 * Plain output: matching lines as text (or NDJSON) as they are read. Ends at the end of input,
 * or, following, on Ctrl-C; a closed pipe (`| head`) ends it quietly.
 * @throws the write error, other than EPIPE, that stopped printing
 */
export async function runPlain(options: LogsOptions, io: LogsIo): Promise<void> {
  const stop = new AbortController();
  const printer = new PlainPrinter(
    io.stdout,
    {
      filter: options.filter,
      json: options.json,
      tail: options.limit,
      instance: options.files !== undefined,
      paint: paint(colorWanted(io.stdout.isTTY)),
    },
    () => stop.abort(),
  );
  let catchingUp: Promise<void> = Promise.resolve();
  await readSource(options, io, printer.sink, printer.take, stop.signal, (e) => {
    if (e.type === 'caught-up') catchingUp = catchingUp.then(() => printer.caughtUp());
  });
  await catchingUp;
  if (printer.error !== undefined)
    throw runtimeError(`cannot write the output: ${printer.error.message}`);
}

/**
 * The viewer: renders {@link LogViewer} over a store the reader fills, until `q`.
 * @param keyboard - where keys come from (a terminal)
 */
export async function runViewer(
  options: LogsOptions,
  io: LogsIo,
  keyboard: NodeJS.ReadStream,
): Promise<void> {
  const limit = options.limit ?? DEFAULT_LIMIT;
  const name =
    options.files !== undefined
      ? `${options.files.length} files`
      : options.file === undefined
        ? 'stdin'
        : basename(options.file);
  const store = new LogStore(limit, name);
  const stop = new AbortController();
  // Only the last `limit` lines are kept, so a huge file is read from near its end: 4 KiB a line
  // is several times a pino request line, so the window holds `limit` lines in practice.
  const tailBytes = limit * 4096;
  let rotations = 0;
  const onEvent = (e: ReaderEvent) => {
    switch (e.type) {
      case 'opened':
        store.setStatus({ skippedBytes: e.skippedBytes });
        break;
      case 'caught-up':
        store.setStatus({
          phase: options.follow && options.file !== undefined ? 'following' : 'done',
          error: undefined,
        });
        break;
      case 'truncated':
      case 'rotated':
        store.setStatus({ rotations: ++rotations });
        break;
      case 'error':
        store.setStatus({ error: e.error.message });
        break;
    }
  };
  // The alternate screen, as `less` and `vim` use: the shell's scrollback is left as it was.
  io.stdout.write('\u001b[?1049h');
  try {
    const app = render(<LogViewer store={store} initialFilter={options.filter} refreshMs={80} />, {
      stdin: keyboard,
      stdout: io.stdout,
      exitOnCtrlC: true,
      patchConsole: false,
    });
    // stdin shows what has arrived as soon as it has (a `tail -f` upstream never ends it); done at its end
    const live = () => store.setStatus({ phase: 'following', error: undefined });
    const reading = readSource(
      options,
      io,
      (lines) => store.append(lines),
      (lines) => store.appendSourced(lines),
      stop.signal,
      onEvent,
      tailBytes,
      live,
    ).catch((e: unknown) =>
      store.setStatus({ phase: 'error', error: e instanceof Error ? e.message : String(e) }),
    );
    try {
      await app.waitUntilExit();
    } finally {
      stop.abort();
      app.cleanup();
      await reading;
    }
  } finally {
    io.stdout.write('\u001b[?1049l');
  }
}

/**
 * Runs `attest logs`: the viewer when stdout is a terminal and keys can be read, else plain lines.
 *
 * Keys come from stdin when stdin is a terminal and the log is a FILE. When the log arrives on
 * stdin, keys are read from `/dev/tty` instead (as `less` does); with no terminal to open, the
 * output falls back to plain lines. `--json` always prints NDJSON.
 */
export async function runLogs(options: LogsOptions, io: LogsIo = processIo()): Promise<void> {
  if (options.file === undefined && options.files === undefined && io.stdin.isTTY === true) {
    throw usageError(
      'no log to read: pass a FILE (the ATTEST_LOG_FILE of the server) or pipe the log on stdin',
    );
  }
  if (options.json || io.stdout.isTTY !== true) return runPlain(options, io);
  const fromFiles = options.file !== undefined || options.files !== undefined;
  const keyboard = fromFiles && io.stdin.isTTY === true ? io.stdin : io.openKeyboard();
  if (keyboard === undefined) return runPlain(options, io);
  try {
    await runViewer(options, io, keyboard);
  } finally {
    if (keyboard !== io.stdin) keyboard.destroy();
    // The log on stdin may not have ended (a `tail -f` upstream); stop reading it so the process can exit.
    if (!fromFiles) io.stdin.destroy();
  }
}
