import { watch, type FSWatcher, type Stats } from 'node:fs';
import { open, stat, type FileHandle } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import { LineSplitter } from './lineSplitter.js';

/**
 * Receives lines in batches, oldest first. A returned promise is awaited before reading on,
 * which is how a slow consumer (a pipe to `less`) holds the reader back instead of the reader
 * buffering the file in memory.
 */
export type LineSink = (lines: string[]) => void | Promise<void>;

/** What the file reader reports besides lines. */
export type ReaderEvent =
  /** The file is open; reading starts `skippedBytes` in (the tail of a large file). */
  | { readonly type: 'opened'; readonly skippedBytes: number }
  /** Everything present in the file has been read (emitted after each catch-up, follow or not). */
  | { readonly type: 'caught-up' }
  /** The file shrank (copytruncate) and is read again from its start. */
  | { readonly type: 'truncated' }
  /** The path now names another file (rename rotation); the old one was drained and the new one opened. */
  | { readonly type: 'rotated' }
  /** A read or stat failed; following retries at the next poll. */
  | { readonly type: 'error'; readonly error: Error };

/** Options of {@link readLogFile}. */
export interface ReadFileOptions {
  /** Keep reading as the file grows, across rotations, until `signal` aborts. */
  readonly follow: boolean;
  /** Stops reading; the returned promise then resolves. */
  readonly signal?: AbortSignal;
  /** Start this many bytes before the end (the partial first line is dropped); default: the start. */
  readonly tailBytes?: number;
  /** Longest interval between checks of the followed file (a change reported by `fs.watch` checks sooner); default 250 ms. */
  readonly pollMs?: number;
  /** Bytes per read; default 64 KiB. */
  readonly chunkBytes?: number;
  readonly onEvent?: (event: ReaderEvent) => void;
}

const sameFile = (a: Stats, b: Stats) => a.ino === b.ino && a.dev === b.dev;

/**
 * Reads a log file incrementally in fixed-size chunks, never the whole file at once.
 *
 * Following checks the path with `stat` every `pollMs`, and sooner when `fs.watch` on the
 * file's directory reports a change to it. The poll is the mechanism, the watch only a wake-up:
 * network mounts and some container file systems deliver no watch events, and the watch may not
 * be available at all (inotify limits); then following still works, only at the poll's pace.
 * Waking early also narrows the copytruncate window: lines written between the last read and the
 * truncation are lost to any follower (they are only in the copy), as with `tail -F`.
 * At each check:
 * - the path names another file (inode changed: rename rotation, or the file was replaced):
 *   finish reading the old file first, since the writer may have appended after the rename, then
 *   open the new file from its start;
 * - the file is shorter than what was read (copytruncate): read it again from its start;
 * - the file grew: read the new bytes.
 * While the path is missing (between a rename and the writer creating the new file) the old file
 * stays open and is still read.
 *
 * @param path - the file
 * @param sink - receives the lines
 * @param options - follow, tail and polling options
 * @returns a promise that resolves at the end of the file (not following) or when `signal` aborts
 */
export async function readLogFile(
  path: string,
  sink: LineSink,
  options: ReadFileOptions,
): Promise<void> {
  const { signal, follow, onEvent } = options;
  // A function, not a narrowed property read: the signal changes across awaits.
  const aborted = () => signal?.aborted === true;
  const pollMs = options.pollMs ?? 250;
  const buffer = Buffer.allocUnsafe(options.chunkBytes ?? 64 * 1024);

  let file: FileHandle = await open(path, 'r');
  let fileStat = await file.stat();
  let position = Math.max(0, fileStat.size - (options.tailBytes ?? Number.POSITIVE_INFINITY));
  let splitter = new LineSplitter({ skipFirstPartialLine: position > 0 });
  onEvent?.({ type: 'opened', skippedBytes: position });

  /** Reads from `position` to the current end of `file`. */
  const drain = async (): Promise<void> => {
    while (!aborted()) {
      const { bytesRead } = await file.read(buffer, 0, buffer.length, position);
      if (bytesRead === 0) return;
      position += bytesRead;
      const lines = splitter.push(buffer.subarray(0, bytesRead));
      if (lines.length > 0) await sink(lines);
    }
  };

  const reopen = async (): Promise<void> => {
    // Open the new file before letting go of the old one: if the open fails, the next poll retries.
    const next = await open(path, 'r');
    await file.close().catch(() => undefined);
    file = next;
    fileStat = await file.stat();
    position = 0;
    splitter = new LineSplitter();
  };

  const wake = follow ? new Wake(path, pollMs, signal) : undefined;
  try {
    await drain();
    if (!follow) {
      const last = splitter.flush();
      if (last.length > 0) await sink(last);
      onEvent?.({ type: 'caught-up' });
      return;
    }
    onEvent?.({ type: 'caught-up' });
    while (!aborted()) {
      await wake?.next();
      if (aborted()) return;
      try {
        const pathStat = await stat(path).catch((e: NodeJS.ErrnoException) => {
          if (e.code === 'ENOENT') return undefined; // mid-rotation: keep reading the old file
          throw e;
        });
        if (pathStat !== undefined && !sameFile(pathStat, fileStat)) {
          await drain();
          // The old file is finished: its unterminated last line will not be completed.
          const last = splitter.flush();
          if (last.length > 0) await sink(last);
          await reopen();
          onEvent?.({ type: 'rotated' });
        } else if (pathStat !== undefined && pathStat.size < position) {
          // Reopen rather than seek: the same inode number may have been reused by a new file.
          await reopen();
          onEvent?.({ type: 'truncated' });
        }
        const before = position;
        await drain();
        if (position !== before) onEvent?.({ type: 'caught-up' });
      } catch (e) {
        onEvent?.({ type: 'error', error: e instanceof Error ? e : new Error(String(e)) });
      }
    }
  } finally {
    wake?.close();
    await file.close().catch(() => undefined);
  }
}

/**
 * The follower's pause: resolves after `pollMs`, or as soon as the file's directory reports a
 * change to the file (or anything, when the platform does not say which file), or on abort.
 * An event that arrives while the follower is busy reading is remembered, so none is missed.
 */
class Wake {
  private watcher: FSWatcher | undefined;
  private pending = false;
  private resolve: (() => void) | undefined;

  constructor(
    path: string,
    private readonly pollMs: number,
    private readonly signal: AbortSignal | undefined,
  ) {
    const name = basename(path);
    try {
      // The directory, not the file: a watch on the file follows its inode away on rename.
      this.watcher = watch(dirname(path), { persistent: false }, (_event, changed) => {
        if (changed === null || changed === name) this.nudge();
      });
      this.watcher.on('error', () => this.close()); // polling carries on alone
    } catch {
      this.watcher = undefined;
    }
  }

  /** Waits for the next reason to look at the file. */
  next(): Promise<void> {
    if (this.pending || this.signal?.aborted === true) {
      this.pending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.signal?.removeEventListener('abort', done);
        this.resolve = undefined;
        this.pending = false;
        resolve();
      };
      const timer = setTimeout(done, this.pollMs);
      this.signal?.addEventListener('abort', done, { once: true });
      this.resolve = done;
    });
  }

  close(): void {
    this.watcher?.close();
    this.watcher = undefined;
  }

  private nudge(): void {
    if (this.resolve !== undefined) this.resolve();
    else this.pending = true;
  }
}

/**
 * Reads a stream (stdin) to its end, or until `signal` aborts (which destroys the stream).
 * @param stream - the input
 * @param sink - receives the lines
 * @param signal - stops reading
 * @param onCaughtUp - called each time everything sent so far has been read (the stream may go on)
 */
export async function readLogStream(
  stream: NodeJS.ReadableStream & { destroy?: () => void; readableLength?: number },
  sink: LineSink,
  signal?: AbortSignal,
  onCaughtUp?: () => void,
): Promise<void> {
  const splitter = new LineSplitter();
  const stop = () => stream.destroy?.();
  signal?.addEventListener('abort', stop, { once: true });
  try {
    for await (const chunk of stream) {
      if (signal?.aborted === true) return;
      const lines = splitter.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
      if (lines.length > 0) await sink(lines);
      // Nothing more buffered: what the writer has sent so far is shown, even if it never ends the stream.
      if (stream.readableLength === 0) onCaughtUp?.();
    }
    const last = splitter.flush();
    if (last.length > 0) await sink(last);
  } catch (e) {
    // Destroying the stream on abort ends the loop with an error that is not a failure.
    if (signal?.aborted !== true) throw e;
  } finally {
    signal?.removeEventListener('abort', stop);
  }
}
