import {
  InputFileError,
  openInputFileStream,
  readInputFile,
  readInputFileSync,
  type InputFileOptions,
} from '../inputFile.js';
import { usageError } from './errors.js';

/** The most bytes any CLI input file holds (a token is at most 64 KiB; keys, PEM, JSON are smaller). */
export const CLI_INPUT_MAX_BYTES = 128 * 1024;

/** `readInputFile` (the one reader of CLI input files) with its refusals as usage errors (exit 2). */
export async function readCliFile(path: string, options: InputFileOptions): Promise<Buffer> {
  try {
    return await readInputFile(path, options);
  } catch (err) {
    throw err instanceof InputFileError ? usageError(err.message) : err;
  }
}

/** `readInputFileSync` with its refusals as usage errors (exit 2). */
export function readCliFileSync(path: string, options: InputFileOptions): Buffer {
  try {
    return readInputFileSync(path, options);
  } catch (err) {
    throw err instanceof InputFileError ? usageError(err.message) : err;
  }
}

/** `openInputFileStream` with its refusals as usage errors (exit 2). */
export function openCliFileStream(
  path: string,
  options: InputFileOptions,
): ReturnType<typeof openInputFileStream> {
  try {
    return openInputFileStream(path, options);
  } catch (err) {
    throw err instanceof InputFileError ? usageError(err.message) : err;
  }
}
