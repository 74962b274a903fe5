import { Fault, type ExitCode } from '../core/fault.js';

/** Exit codes (docs/cli.md): 0 success, 1 negative answer, 2 bad usage/input, 3 runtime failure. */
export const EXIT = { ok: 0, negative: 1, usage: 2, runtime: 3 } as const;

/** An error the CLI reports as one line on stderr, with its exit code. */
export class CliError extends Fault {
  override readonly name = 'CliError';
  constructor(
    message: string,
    readonly exitCode: ExitCode = EXIT.usage,
    /** a usage error names the `--help` to run; a setting (environment, master key) is fixed elsewhere */
    readonly helpHint: boolean = exitCode === EXIT.usage,
  ) {
    super('cli', message, { exit: { code: exitCode, helpHint } });
  }
}

/**
 * The CLI's one line for a fault that says how the CLI ends on it (see Fault's `exit`), else
 * undefined: the caller says what failed, or main reports an unexpected failure.
 */
export function cliErrorOf(err: unknown): CliError | undefined {
  if (err instanceof CliError) return err;
  const exit = err instanceof Fault ? err.exit : undefined;
  return exit && new CliError(exit.message, exit.code, exit.helpHint);
}

/** Bad usage or bad input (exit 2). */
export const usageError = (message: string) => new CliError(message, EXIT.usage);
/** A bad setting (environment variable, master key): exit 2, but `--help` is not where the fix is. */
export const settingError = (message: string) => new CliError(message, EXIT.usage, false);
/** A runtime failure such as an unreachable database (exit 3). */
export const runtimeError = (message: string) => new CliError(message, EXIT.runtime);
/** The operation's negative answer, such as nothing to revoke or a declined confirmation (exit 1). */
export const negativeError = (message: string) => new CliError(message, EXIT.negative);
