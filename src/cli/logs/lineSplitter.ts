const NEWLINE = 0x0a;

/** Longest line kept whole; pino request lines are well under 1 KiB. */
export const MAX_LINE_BYTES = 1024 * 1024;

const decode = (bytes: Uint8Array): string =>
  Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');

function pushLine(out: string[], text: string): void {
  const line = text.endsWith('\r') ? text.slice(0, -1) : text;
  if (line.trim() !== '') out.push(line);
}

/**
 * Turns byte chunks into lines. Splits on bytes, not characters, so a UTF-8 character cut by a
 * chunk boundary is decoded whole; keeps the unfinished last line until its newline arrives
 * (a writer may be in the middle of it). Blank lines are dropped, `\r\n` is accepted.
 *
 * Memory stays bounded on hostile input: a "line" longer than `maxLineBytes` (a binary file,
 * a file with no newlines) is emitted cut at that length and the rest of it, up to the next
 * newline, is dropped.
 */
export class LineSplitter {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /** `skip`: drop up to the next newline (reading began mid-line, or the line was already cut). */
  private mode: 'keep' | 'skip';
  private readonly maxLineBytes: number;

  /**
   * @param options.skipFirstPartialLine - drop everything up to the first newline (reading starts mid-file)
   * @param options.maxLineBytes - cut lines longer than this
   */
  constructor(options: { skipFirstPartialLine?: boolean; maxLineBytes?: number } = {}) {
    this.mode = options.skipFirstPartialLine === true ? 'skip' : 'keep';
    this.maxLineBytes = options.maxLineBytes ?? MAX_LINE_BYTES;
  }

  /**
   * Feeds a chunk. The splitter copies what it keeps, so the caller may reuse its buffer.
   * @returns the lines the chunk completed, oldest first
   */
  push(chunk: Uint8Array): string[] {
    const out: string[] = [];
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(NEWLINE, start);
      if (nl === -1) {
        this.append(chunk.subarray(start), out);
        return out;
      }
      if (this.mode === 'keep' && this.pendingBytes === 0 && nl - start <= this.maxLineBytes) {
        // Fast path, the common case: the whole line is inside this chunk; decode it in place.
        pushLine(out, decode(chunk.subarray(start, nl)));
        start = nl + 1;
        continue;
      }
      this.append(chunk.subarray(start, nl), out);
      if (this.mode === 'keep') this.emit(out);
      this.clear();
      this.mode = 'keep';
      start = nl + 1;
    }
  }

  /** At the end of the input: the unfinished last line, if any. */
  flush(): string[] {
    const out: string[] = [];
    if (this.mode === 'keep') this.emit(out);
    this.reset();
    return out;
  }

  /** Drops the unfinished line (the file was truncated or replaced under it). */
  reset(): void {
    this.clear();
    this.mode = 'keep';
  }

  private append(part: Uint8Array, out: string[]): void {
    if (this.mode === 'skip' || part.length === 0) return;
    const room = this.maxLineBytes - this.pendingBytes;
    this.pending.push(Buffer.from(part.subarray(0, room)));
    this.pendingBytes += Math.min(part.length, room);
    if (part.length > room) {
      // Over-long: emit the head now (it shows as an unparsed line) and drop the rest.
      this.emit(out);
      this.clear();
      this.mode = 'skip';
    }
  }

  private emit(out: string[]): void {
    if (this.pendingBytes === 0) return;
    pushLine(out, decode(Buffer.concat(this.pending, this.pendingBytes)));
  }

  private clear(): void {
    this.pending = [];
    this.pendingBytes = 0;
  }
}
