/**
 * The one base of attest's faults: what went wrong (`code`, also in the log line), what an HTTP
 * answer to it says (Retry-After, and 503 when a retry soon may be served), and how the CLI ends
 * on it (exit code and one line). The HTTP layer and the CLI read these fields instead of knowing
 * the classes. In core, and importing nothing, so that every layer may build on it; expected
 * rejections are not faults (Rejection in reasons.ts: a value, never thrown past the verifier).
 */

/** The CLI's exit codes for a failure (docs/cli.md): 1 negative answer, 2 bad usage or setting, 3 runtime. */
export type ExitCode = 1 | 2 | 3;

/** How the CLI ends on a fault: the one line it prints, its exit code, whether it names `--help`. */
export interface CliExit {
  code: ExitCode;
  message: string;
  helpHint: boolean;
}

export interface FaultOptions extends ErrorOptions {
  /** seconds after which a retry may meet a working service (HTTP Retry-After); none: retrying will not help */
  retryAfterSeconds?: number;
  /** the HTTP answer is 503 with this message (nothing was decided, a retry may be served); none: 500 */
  unavailable?: string;
  /** how the CLI ends on it (message: the fault's own; helpHint: false); none: an unexpected failure */
  exit?: ExitCode | { code: ExitCode; message?: string; helpHint?: boolean };
}

export class Fault extends Error {
  override readonly name: string = 'Fault';
  /** what went wrong, stable and snake_case (never a driver's code, which the database checks read) */
  readonly code: string;
  readonly retryAfterSeconds: number | undefined;
  readonly unavailable: string | undefined;
  readonly exit: CliExit | undefined;
  constructor(code: string, message: string, options: FaultOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.unavailable = options.unavailable;
    const exit = typeof options.exit === 'number' ? { code: options.exit } : options.exit;
    this.exit = exit && {
      code: exit.code,
      message: exit.message ?? message,
      helpHint: exit.helpHint ?? false,
    };
  }
}

/** The fault `err` is, or one inside it (drizzle wraps what a statement threw in its `cause`). */
export function faultOf(err: unknown): Fault | undefined {
  let e = err;
  for (let depth = 0; depth < 5 && e && typeof e === 'object'; depth++) {
    if (e instanceof Fault) return e;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}
