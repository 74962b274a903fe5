import type { Command } from 'commander';
import type { Service } from '../../core/services.js';
import type { AllowlistKind } from './allowlistKind.js';
import type { VerifyFileKind } from './verifyFileKind.js';

/**
 * One evidence kind as the CLI sees it (the CLI's adapter of core's kind, src/core/kind.ts): everything kind-specific the generic commands
 * (`verify-file`, `allowlist`, `dev`, `token`) need, so that they hold no branch on a kind.
 */
export interface CliKind {
  /** the token's `device.service` (and the subcommand name of `dev mint` and `token wrap`) */
  service: Service;
  /** `attest token wrap <service>` */
  wrapCommand: () => Command;
  /** `attest dev mint <service>` */
  mintCommand: () => Command;
  /** the allowlist entry this kind owns (the two Android kinds share one: the package) */
  allowlist?: AllowlistKind;
  /** its `verify-file` flags, checks and offline stores */
  verifyFile: VerifyFileKind;
  /** `attest devices`' last-used line for a key with none recorded (default: never) */
  unrecordedUse?: string;
  /** lines of the parent commands' help examples, `$ attest ...` */
  examples: { dev: string; devMint?: string; token: string };
}
