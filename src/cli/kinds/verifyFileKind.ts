import type { Command } from 'commander';
import type { Config } from '../../config.js';
import type { ReceiptSummary } from '../../core/apple/tokenReceipt.js';
import type { createMemoryAllowlist } from '../../core/memoryStores.js';
import type { KeyMode } from '../../core/ports.js';
import type { VerifyOutcome } from '../../core/outcome.js';
import type { buildVerifiers } from '../../core/verifiers.js';
import type { VerifyInput } from '../../core/verify.js';
import type { Admin } from '../admin.js';

/** What `buildVerifiers` takes besides the allowlist and the mode: each kind gives its part. */
export type VerifierParts = Partial<
  Omit<Parameters<typeof buildVerifiers>[0], 'allowlist' | 'mode'>
>;

/** verify-file's flags as commander gives them: each kind reads its own. */
export type VerifyFileFlags = Record<string, unknown> & {
  at?: string;
  appId: string[];
  json?: boolean;
  devRoots?: boolean;
};

/** Options a kind adds to verify-file, and where among all of them `--help` lists them. */
export interface VerifyFileOptions {
  /** the place in --help (generic flags: 10 nonces, 60 --dev-roots and the result token's, 90 --json) */
  at: number;
  add(command: Command): Command;
}

/** A kind's part of `attest verify-file`. */
export interface VerifyFileKind {
  options: VerifyFileOptions[];
  /** true when it reads a given attestation challenge (`--challenge`) instead of deriving it */
  readsChallenge?: true;
  /** its flags that only an attestation token takes (refused with a result token), in camelCase */
  attestationOnly: string[];
  /** the rejections a test key's wider trust can change: only these are re-run as a test key */
  testTrustReasons: string[];
  /** checks a file on its own instead of a token (App Attest receipts); null when not asked to */
  alone?(tokenPath: string | undefined, opts: VerifyFileFlags): Promise<boolean> | null;
  /** checks its flags before the token is read (throws a usage error) */
  check?(opts: VerifyFileFlags): void;
  /** whether its flags stand in for the database (an allowlist entry or a key given on the command line) */
  offline(opts: VerifyFileFlags): boolean;
  /** its fields of the verification's input */
  input?(opts: VerifyFileFlags): Partial<VerifyInput>;
  /** checks the token against its flags once the token is read (throws a usage error) */
  checkToken?(token: Uint8Array, opts: VerifyFileFlags): void;
  /** reads its configuration and files: what the verification runs with */
  prepare(opts: VerifyFileFlags, cfg: Config): Promise<VerifyFileSetup>;
}

/** A kind's part of the verifiers, as a key of `mode` would verify with the development root `devRoot`. */
export type VerifierPartsOf = (mode: KeyMode, devRoot: Uint8Array | null) => VerifierParts;

/** A kind ready to verify: its stores, from the flags or the database, and what it reports. */
export interface VerifyFileSetup {
  /** its allowlist entries given on the command line */
  offlineEntries?(token: Uint8Array): Parameters<typeof createMemoryAllowlist>[0];
  /** its verifier part with the stores of the command line */
  offline(token: Uint8Array): VerifierPartsOf;
  /** its verifier part with the database's stores, read-only */
  database(admin: Admin): Promise<VerifierPartsOf>;
  /** an error of its own that is a runtime error of the command (exit 1), else undefined */
  fault?(err: unknown): Error | undefined;
  /** the trust roots it used, named for the report (only App Attest names them today) */
  trustRoots?(): string;
  /** what it reports beside the verdict (never changing it) */
  receipt?(token: Uint8Array, at: Date, outcome: VerifyOutcome): Promise<ReceiptSummary | null>;
}
