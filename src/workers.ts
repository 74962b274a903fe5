import { availableParallelism } from 'node:os';

/**
 * How the workers of `serve --workers` share the port: `reusePort`, each worker listens on it
 * itself (SO_REUSEPORT) and the kernel spreads new connections over them; `cluster`, the primary
 * accepts every connection and hands it to a worker (node:cluster's round robin), where Node has
 * no `reusePort` listen option (before 22.12 and 23.1) or the platform is not Linux.
 */
export type Balancing = 'reusePort' | 'cluster';

/** The balancing this Node.js gives (`version` like process.versions.node). */
export function balancingOf(
  version: string = process.versions.node,
  platform: NodeJS.Platform = process.platform,
): Balancing {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  const has = major > 23 || (major === 23 && minor >= 1) || (major === 22 && minor >= 12);
  return has && platform === 'linux' ? 'reusePort' : 'cluster';
}

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
