import type { Command } from 'commander';
import type { InputOf, ResultOf } from '../../admin/operations.js';

/** The kinds of allowlist entry: an App Attest app, an Android package. */
export type AllowlistEntryKind = InputOf<'allowlist.remove'>['kind'];

/** An allowlist entry kind as `attest allowlist` sees it. */
export interface AllowlistKind {
  /** `allowlist add <entry>`, `allowlist remove <entry> <id>` */
  entry: AllowlistEntryKind;
  /** what an entry is, for `allowlist add`'s description: "an iOS app" */
  noun: string;
  /** `allowlist add <entry>` */
  addCommand(): Command;
  /** the list narrowed to this kind's entry `id` (every other kind's empty), or null when absent */
  pick(list: ResultOf<'allowlist.list'>, id: string): ResultOf<'allowlist.list'> | null;
  /** rows of `allowlist list` (KIND, ID, POLICY, KEY PAIRS) */
  listRows(list: ResultOf<'allowlist.list'>): string[][];
  /**
   * What `allowlist remove` asks before removing `id` (or only its key pair `keyId`), or null
   * when there is no such entry; throws a usage error for a flag the kind does not take.
   */
  removePrompt(
    id: string,
    keyId: string | undefined,
    found: ResultOf<'allowlist.find'>,
  ): string[] | null;
  /** the `--key-id` check that comes before anything is asked: throws when the kind has no key pairs */
  checkRemove(keyId: string | undefined): void;
  /** help example lines, `$ attest allowlist ...`: its plainest `add`, one for `add`'s help, its `remove`s */
  examples: { add: string; addHelp: string; remove: string[] };
}
