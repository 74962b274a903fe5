import { parseDuration } from '../core/duration.js';
import { usageError } from './errors.js';

/** ISO 8601 date and time with its offset: without one, JavaScript would read the machine's local time. */
const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$/i;

/**
 * The instant a time flag names, or a usage error quoting `example` as the form to use.
 * @param flag - the flag as the message names it, e.g. `--at`
 */
export function isoInstant(text: string, flag: string, example: string): Date {
  const d = new Date(text);
  if (!ISO_INSTANT.test(text) || Number.isNaN(d.getTime()))
    throw usageError(
      `${flag} takes an ISO 8601 time with its offset, such as ${example}, got "${text}"`,
    );
  return d;
}

/**
 * A minted token's time: `at` (an ISO instant, under the flag `atFlag`), else `age` (`--age`, a
 * duration) before `now`, else `now`; the callers refuse both at once before they ask.
 */
export function mintedInstant(
  at: string | undefined,
  atFlag: string,
  age: string | undefined,
  now: Date,
): Date {
  if (age !== undefined) {
    const seconds = parseDuration(age);
    if (seconds === null)
      throw usageError(`--age takes a duration such as 30s or 5m, got "${age}"`);
    return new Date(now.getTime() - seconds * 1000);
  }
  return at === undefined ? now : isoInstant(at, atFlag, '2026-01-23T12:13:33Z');
}
