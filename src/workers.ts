import { availableParallelism } from 'node:os';

/** The most `--workers` takes: far beyond any core count, short of a fork bomb. */
export const MAX_WORKERS = 1024;

/** What `--workers` and ATTEST_WORKERS take, for the one line that refuses anything else. */
export const WORKERS_RULE = `a whole number from 1 to ${MAX_WORKERS}, or auto (one per core)`;

/**
 * A `--workers` or ATTEST_WORKERS value: a whole number from 1 to MAX_WORKERS, or `auto` for one
 * process per core (os.availableParallelism); null for anything else (0, negative, not a number).
 */
export function parseWorkers(text: string, cores: number = availableParallelism()): number | null {
  const t = text.trim();
  if (t === 'auto') return cores;
  if (!/^\d{1,5}$/.test(t)) return null;
  const n = Number(t);
  return n >= 1 && n <= MAX_WORKERS ? n : null;
}
