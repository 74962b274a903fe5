import { Fault } from './core/fault.js';
import {
  closeSync,
  constants,
  createReadStream,
  fstatSync,
  openSync,
  readSync,
  type ReadStream,
  type Stats,
} from 'node:fs';

/** A file the CLI was asked to read cannot be read as given; the message is one line. */
export class InputFileError extends Fault {
  override readonly name = 'InputFileError';
  constructor(message: string) {
    super('input_file', message, { exit: { code: 2, helpHint: true } });
  }
}

export interface InputFileOptions {
  /** the most bytes read; a larger file is refused before it is read */
  maxBytes: number;
  /** names the input in messages: a flag (`--attestation`) or a description */
  what: string;
  /** the message for a file over the limit, given its size in words (default: a generic one) */
  tooLarge?: (size: string) => string;
  /** `-` reads stdin (async reads only) */
  stdin?: boolean;
}

/**
 * Reads a file the CLI was given, never more than `maxBytes`: a regular file only (a FIFO, a
 * device, a socket or a directory is refused at once, without blocking on it), its size checked
 * before reading and the read itself bounded (a file that grows meanwhile). `-` reads stdin, also
 * bounded, when `stdin` is set. Every refusal is an `InputFileError` with one line.
 */
export async function readInputFile(path: string, options: InputFileOptions): Promise<Buffer> {
  if (path === '-' && options.stdin) {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of process.stdin) {
      chunks.push(chunk as Buffer);
      size += (chunk as Buffer).length;
      if (size > options.maxBytes) {
        process.stdin.destroy();
        throw new InputFileError(tooLarge(options, 'over that'));
      }
    }
    return Buffer.concat(chunks, size);
  }
  return readInputFileSync(path, options);
}

/** `readInputFile` for a path (never stdin), synchronously. */
export function readInputFileSync(path: string, options: InputFileOptions): Buffer {
  const { fd, info } = openRegularFile(path, options);
  try {
    // sized by what fstat said, grown for a file that grows meanwhile, never read past one byte
    // over the limit (allocating the limit itself would cost gigabytes for a backup)
    const cap = options.maxBytes + 1;
    let buffer = Buffer.alloc(Math.min(cap, info.size + 1));
    let size = 0;
    for (;;) {
      if (size === buffer.length) {
        const grown = Buffer.alloc(Math.min(cap, buffer.length * 2));
        buffer.copy(grown, 0, 0, size);
        buffer = grown;
      }
      const n = readSync(fd, buffer, size, buffer.length - size, null);
      if (n === 0) break;
      size += n;
      if (size > options.maxBytes) throw new InputFileError(tooLarge(options, 'over that'));
    }
    return buffer.subarray(0, size);
  } catch (err) {
    if (err instanceof InputFileError) throw err;
    throw new InputFileError(
      `${options.what}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
    );
  } finally {
    closeSync(fd);
  }
}

/**
 * Opens a file the CLI was given for streaming (a backup: too large to hold in memory), with the
 * same refusals as `readInputFileSync` before any byte is read: a regular file only, opened
 * without blocking, at most `maxBytes` by its size. What it unpacks to is for the reader to bound.
 */
export function openInputFileStream(path: string, options: InputFileOptions): ReadStream {
  const { fd } = openRegularFile(path, options);
  // the stream reads no further than the size checked above, should the file grow meanwhile
  return createReadStream('', { fd, end: options.maxBytes - 1 });
}

/**
 * Opens `path` without blocking (a FIFO with no writer would otherwise hang here) and checks it
 * is a regular file within `maxBytes`; the descriptor is closed again on a refusal.
 */
function openRegularFile(path: string, options: InputFileOptions): { fd: number; info: Stats } {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0));
  } catch (err) {
    throw new InputFileError(
      `${options.what}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
    );
  }
  try {
    const info = fstatSync(fd);
    if (!info.isFile())
      throw new InputFileError(
        `${options.what}: ${path} is ${kindOf(info)}, not a regular file: give a file${options.stdin ? ', or - for stdin' : ''}`,
      );
    if (info.size > options.maxBytes)
      throw new InputFileError(tooLarge(options, `${info.size} bytes`));
    return { fd, info };
  } catch (err) {
    closeSync(fd);
    if (err instanceof InputFileError) throw err;
    throw new InputFileError(
      `${options.what}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
    );
  }
}

function tooLarge(options: InputFileOptions, size: string): string {
  return (
    options.tooLarge?.(size) ??
    `${options.what}: the file is ${size}, more than the ${options.maxBytes} bytes it may hold`
  );
}

function kindOf(info: Stats): string {
  if (info.isDirectory()) return 'a directory';
  if (info.isFIFO()) return 'a FIFO (named pipe)';
  if (info.isCharacterDevice()) return 'a character device';
  if (info.isBlockDevice()) return 'a block device';
  if (info.isSocket()) return 'a socket';
  return 'not a file';
}
