import { PassThrough, Writable } from 'node:stream';
import type { LogsIo } from '../../../src/cli/logs/runLogs.js';

/** A stdout stand-in that keeps what is written; `failAfter` writes, each write fails with `code`. */
export function captureOut(
  options: { isTTY?: boolean; failAfter?: number; code?: string; slow?: boolean } = {},
) {
  let text = '';
  let writes = 0;
  const out = new Writable({
    highWaterMark: options.slow === true ? 16 : 16 * 1024,
    write(chunk: Buffer, _enc, callback) {
      if (options.failAfter !== undefined && writes >= options.failAfter) {
        callback(
          Object.assign(new Error(`write ${options.code ?? 'EPIPE'}`), {
            code: options.code ?? 'EPIPE',
          }),
        );
        return;
      }
      writes++;
      text += chunk.toString('utf8');
      if (options.slow === true) setTimeout(callback, 1);
      else callback();
    },
  });
  Object.assign(out, { isTTY: options.isTTY });
  return {
    stream: out as unknown as NodeJS.WriteStream,
    text: () => text,
    lines: () => text.split('\n').filter((l) => l !== ''),
  };
}

/** Process streams for `runLogs`: stdin carries `input` (ended) unless `stdinTTY`. */
export function fakeIo(options: {
  input?: string;
  stdout: NodeJS.WriteStream;
  stdinTTY?: boolean;
  keyboard?: NodeJS.ReadStream;
}): LogsIo & { stdin: NodeJS.ReadStream } {
  const stdin = new PassThrough();
  Object.assign(stdin, { isTTY: options.stdinTTY });
  if (options.input !== undefined) stdin.end(options.input);
  return {
    stdin: stdin as unknown as NodeJS.ReadStream,
    stdout: options.stdout,
    openKeyboard: () => options.keyboard,
  };
}
