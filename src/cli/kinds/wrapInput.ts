import { CLI_INPUT_MAX_BYTES, readCliFile } from '../inputFiles.js';

/** A file (or stdin, `-`) of evidence that `token wrap` reads, bounded as every CLI input. */
export function readWrapInput(path: string, flag: string): Promise<Buffer> {
  return readCliFile(path, { maxBytes: CLI_INPUT_MAX_BYTES, what: flag, stdin: true });
}
