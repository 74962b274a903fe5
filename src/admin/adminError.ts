/**
 * An admin operation's expected failure, with the kind the CLI turns into its exit code: `usage`
 * (2, fix the input), `negative` (1, nothing to do, such as no such key), `runtime` (3).
 */
export class AdminError extends Error {
  override readonly name = 'AdminError';
  constructor(
    readonly kind: AdminErrorKind,
    message: string,
  ) {
    super(message);
  }
}

export type AdminErrorKind = 'usage' | 'negative' | 'runtime';
