/**
 * ATTEST_CAPTURE and ATTEST_CAPTURE_MAX (tokens kept for replay, docs/operations.md): which
 * verifies keep their token, and how many captures and token bytes each API key mode keeps.
 */

/** `off`: nothing kept; `rejected`: rejected verifies; `all`: accepted ones too. */
export type CaptureMode = 'off' | 'rejected' | 'all';

export const CAPTURE_MODES = ['off', 'rejected', 'all'] as const;

/** The captures kept per API key mode, and their tokens' bytes (oldest dropped first). */
export interface CaptureMax {
  count: number;
  bytes: number;
}

/** ATTEST_CAPTURE_MAX when unset. */
export const DEFAULT_CAPTURE_MAX = '1000/64MiB';
export const MAX_CAPTURE_COUNT = 100_000;
const MIN_CAPTURE_BYTES = 64 * 1024;
const MAX_CAPTURE_BYTES = 1024 ** 3;

/** What ATTEST_CAPTURE_MAX takes, for the one line that refuses anything else. */
export const CAPTURE_MAX_RULE = `must be COUNT or COUNT/SIZE: COUNT from 1 to ${MAX_CAPTURE_COUNT} captures, SIZE from 64KiB to 1GiB of tokens (KiB, MiB, GiB, or bytes), such as 1000 or 1000/64MiB`;

const UNITS: Record<string, number> = { '': 1, B: 1, KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3 };

/**
 * `COUNT` or `COUNT/SIZE` (`1000`, `1000/64MiB`); a bare COUNT keeps the default 64 MiB. Null
 * for anything else, or out of range.
 */
export function parseCaptureMax(text: string): CaptureMax | null {
  const m = /^(\d{1,6})(?:\/(\d{1,10})(B|KiB|MiB|GiB)?)?$/.exec(text.trim());
  if (!m) return null;
  const count = Number(m[1]);
  const bytes = m[2] === undefined ? 64 * 1024 ** 2 : Number(m[2]) * UNITS[m[3] ?? '']!;
  if (count < 1 || count > MAX_CAPTURE_COUNT) return null;
  if (bytes < MIN_CAPTURE_BYTES || bytes > MAX_CAPTURE_BYTES) return null;
  return { count, bytes };
}

/** ATTEST_CAPTURE_RETENTION when unset: 7 days. */
export const DEFAULT_CAPTURE_RETENTION_SECONDS = 7 * 86_400;
