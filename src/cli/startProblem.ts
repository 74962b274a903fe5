import type { Config } from '../config.js';
import { cliErrorOf, runtimeError, type CliError } from './errors.js';

/**
 * Why a server did not start (`attest serve`, `attest dev up`), as the CLI's one line: a fault
 * that says how the CLI ends on it (the database busy or unusable, a bad setting or master key)
 * is its own line; a port in use names both ways to pick another; anything else cannot start.
 */
export function startProblem(err: unknown, cfg: Pick<Config, 'port' | 'host'>): CliError {
  const exit = cliErrorOf(err);
  if (exit) return exit;
  const e = err as NodeJS.ErrnoException;
  if (e.code === 'EADDRINUSE')
    return runtimeError(
      `port ${cfg.port} on ${cfg.host} is in use: pick another with --port or PORT`,
    );
  return runtimeError(`cannot start: ${e.message}`);
}
