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
