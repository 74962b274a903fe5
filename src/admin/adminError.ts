import { Fault } from '../core/fault.js';

/**
 * An admin operation's expected failure, with the kind the CLI turns into its exit code: `usage`
 * (2, fix the input), `negative` (1, nothing to do, such as no such key), `runtime` (3).
 */
export class AdminError extends Fault {
  override readonly name = 'AdminError';
  constructor(
    readonly kind: AdminErrorKind,
    message: string,
  ) {
    super(kind, message, { exit: { code: EXIT_OF[kind], helpHint: kind === 'usage' } });
  }
}

const EXIT_OF = { usage: 2, negative: 1, runtime: 3 } as const;

export type AdminErrorKind = 'usage' | 'negative' | 'runtime';
