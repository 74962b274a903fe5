import {
  appendFileSync,
  copyFileSync,
  mkdtempSync,
  renameSync,
  rmSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { readLogFile, readLogStream, type ReaderEvent } from '../../../src/cli/logs/logReader.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'attest-logs-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** Starts following `path`, collecting lines and events; `stop` ends it and waits for the reader. */
function follow(
  path: string,
  options: { tailBytes?: number; chunkBytes?: number; pollMs?: number } = {},
) {
  const lines: string[] = [];
  const events: ReaderEvent['type'][] = [];
  const controller = new AbortController();
  const done = readLogFile(path, (batch) => void lines.push(...batch), {
    follow: true,
    signal: controller.signal,
    pollMs: 5,
    onEvent: (e) => events.push(e.type),
    ...options,
  });
  return {
    lines,
    events,
    /** Waits, with a deadline, until the reader has delivered `n` lines. */
    until: (n: number) =>
      vi.waitFor(() => expect(lines.length).toBeGreaterThanOrEqual(n), {
        timeout: 10_000,
        interval: 5,
      }),
    stop: async () => {
      controller.abort();
      await done;
    },
  };
}

describe('readLogFile, not following', () => {
  it('reads a file in small chunks to its end, including an unterminated last line', async () => {
    const path = join(dir, 'app.log');
    writeFileSync(path, 'one\ntwo\nthree');
    const lines: string[] = [];
    const events: string[] = [];
    await readLogFile(path, (b) => void lines.push(...b), {
      follow: false,
      chunkBytes: 3,
      onEvent: (e) => events.push(e.type),
    });
    expect(lines).toEqual(['one', 'two', 'three']);
    expect(events).toEqual(['opened', 'caught-up']);
  });

  it('reads only the tail when asked, dropping the partial first line', async () => {
    const path = join(dir, 'app.log');
    writeFileSync(path, 'first line\nsecond\nthird\n');
    const lines: string[] = [];
    let skipped = -1;
    await readLogFile(path, (b) => void lines.push(...b), {
      follow: false,
      tailBytes: 10,
      onEvent: (e) => {
        if (e.type === 'opened') skipped = e.skippedBytes;
      },
    });
    expect(lines).toEqual(['third']);
    expect(skipped).toBe(24 - 10);
  });

  it('waits for a slow sink before reading on', async () => {
    const path = join(dir, 'app.log');
    writeFileSync(path, 'a\nb\nc\n');
    const seen: string[] = [];
    let inSink = false;
    await readLogFile(
      path,
      async (b) => {
        expect(inSink).toBe(false);
        inSink = true;
        await new Promise((r) => setTimeout(r, 1));
        seen.push(...b);
        inSink = false;
      },
      { follow: false, chunkBytes: 2 },
    );
    expect(seen).toEqual(['a', 'b', 'c']);
  });
});

describe('readLogFile, following', () => {
  it('reads what exists, then lines as they are appended, completing a half-written line', async () => {
    const path = join(dir, 'app.log');
    writeFileSync(path, 'old 1\nold 2\n');
    const f = follow(path);
    await f.until(2);
    appendFileSync(path, 'new 1\nhalf');
    await f.until(3);
    appendFileSync(path, ' done\n');
    await f.until(4);
    await f.stop();
    expect(f.lines).toEqual(['old 1', 'old 2', 'new 1', 'half done']);
    expect(f.events[0]).toBe('opened');
    expect(f.events).toContain('caught-up');
  });

  it('starts over when the file is truncated under it (copytruncate)', async () => {
    const path = join(dir, 'app.log');
    writeFileSync(path, 'before 1\nbefore 2\n');
    const f = follow(path);
    await f.until(2);
    copyFileSync(path, `${path}.1`);
    truncateSync(path, 0);
    await vi.waitFor(() => expect(f.events).toContain('truncated'), {
      timeout: 10_000,
      interval: 5,
    });
    appendFileSync(path, 'after 1\n');
    await f.until(3);
    await f.stop();
    expect(f.lines).toEqual(['before 1', 'before 2', 'after 1']);
  });

  it('drains the renamed file, then opens the new one from its start (rename rotation)', async () => {
    const path = join(dir, 'app.log');
    writeFileSync(path, 'gen1 a\n');
    const f = follow(path);
    await f.until(1);
    renameSync(path, `${path}.1`);
    // The writer still had the old file open: this line lands in app.log.1 after the rename.
    appendFileSync(`${path}.1`, 'gen1 late\n');
    writeFileSync(path, 'gen2 a\ngen2 b\n');
    await f.until(4);
    appendFileSync(path, 'gen2 c\n');
    await f.until(5);
    await f.stop();
    expect(f.lines).toEqual(['gen1 a', 'gen1 late', 'gen2 a', 'gen2 b', 'gen2 c']);
    expect(f.events).toContain('rotated');
  });

  it('keeps going while the path is missing between rename and re-creation', async () => {
    const path = join(dir, 'app.log');
    writeFileSync(path, 'a\n');
    const f = follow(path);
    await f.until(1);
    renameSync(path, `${path}.1`);
    appendFileSync(`${path}.1`, 'b\n');
    await f.until(2); // still read from the old file while app.log does not exist
    writeFileSync(path, 'c\n');
    await f.until(3);
    await f.stop();
    expect(f.lines).toEqual(['a', 'b', 'c']);
    expect(f.events).not.toContain('error');
  });

  it('reads appended lines long before the next poll, woken by the directory watch', async () => {
    const path = join(dir, 'app.log');
    writeFileSync(path, 'a\n');
    const f = follow(path, { pollMs: 60_000 });
    await f.until(1);
    await vi.waitFor(() => expect(f.events).toContain('caught-up'), {
      timeout: 10_000,
      interval: 5,
    });
    appendFileSync(path, 'b\n');
    await f.until(2); // within the 3 s deadline: only the watch can have woken it
    writeFileSync(join(dir, 'other.log'), 'x\n'); // another file's changes are ignored, not read
    appendFileSync(path, 'c\n');
    await f.until(3);
    await f.stop();
    expect(f.lines).toEqual(['a', 'b', 'c']);
  });

  it('resolves promptly when aborted', async () => {
    const path = join(dir, 'app.log');
    writeFileSync(path, '');
    const f = follow(path, { pollMs: 60_000 });
    await vi.waitFor(() => expect(f.events).toContain('caught-up'), {
      timeout: 10_000,
      interval: 5,
    });
    const started = Date.now();
    await f.stop();
    expect(Date.now() - started).toBeLessThan(3000); // not the 60 s poll
  });
});

describe('readLogStream', () => {
  it('reads a stream to its end', async () => {
    const stream = new PassThrough();
    const lines: string[] = [];
    const done = readLogStream(stream, (b) => void lines.push(...b));
    stream.write('x\ny');
    stream.end('\nz');
    await done;
    expect(lines).toEqual(['x', 'y', 'z']);
  });

  it('stops, without an error, when aborted before the stream ends', async () => {
    const stream = new PassThrough();
    const controller = new AbortController();
    const lines: string[] = [];
    const done = readLogStream(stream, (b) => void lines.push(...b), controller.signal);
    stream.write('x\n');
    await vi.waitFor(() => expect(lines).toEqual(['x']), { timeout: 1000, interval: 5 });
    controller.abort();
    await expect(done).resolves.toBeUndefined();
    expect(stream.destroyed).toBe(true);
  });
});
