import type { AllowlistKind } from './allowlistKind.js';
import { androidKeyKind } from './androidKey/androidKeyKind.js';
import { appleKind } from './apple/appleKind.js';
import type { CliKind } from './cliKind.js';
import { gmsKind } from './gms/gmsKind.js';
import { gmsPcKind } from './gmsPc/gmsPcKind.js';

/**
 * The evidence kinds the CLI knows, in the order its help lists them. A new kind is a folder
 * beside these and one line here: `verify-file`, `allowlist`, `dev mint` and `token wrap`
 * take everything kind-specific from the entries.
 */
export const KINDS: readonly CliKind[] = [appleKind, gmsKind, androidKeyKind, gmsPcKind];

/** The allowlist's entry kinds, one per kind that owns one. */
export const ALLOWLIST_KINDS: readonly AllowlistKind[] = KINDS.flatMap((k) =>
  k.allowlist ? [k.allowlist] : [],
);
