import type { Command } from 'commander';
import { observableCodes, parseObserveCodes, type ObserveEntry } from '../../core/observedRules.js';
import type { ObserveChange } from '../../db/observeColumn.js';
import { usageError } from '../errors.js';

/** The observed-rule flags of `allowlist add apple|android`. */
export interface ObserveFlags {
  observe?: string;
  enforce?: string;
}

/**
 * Adds `--observe` and `--enforce` to an `allowlist add` command.
 * @param entry the kind of entry, whose observable codes the help lists
 */
export function addObserveOptions(command: Command, entry: ObserveEntry): Command {
  return command
    .option(
      '--observe <codes>',
      `record these rules' failures without rejecting (comma-separated reason codes: ${observableCodes(entry).join(', ')})`,
    )
    .option(
      '--enforce <codes>',
      'enforce these observed rules again (comma-separated reason codes), or "all"',
    );
}

/**
 * The observed-rule change the flags ask for; undefined when neither is given (the stored set is
 * kept). A code that is not observable for the entry is a usage error listing the ones that are.
 */
export function observeChangeFromOptions(
  entry: ObserveEntry,
  opts: ObserveFlags,
): ObserveChange | undefined {
  if (opts.observe === undefined && opts.enforce === undefined) return undefined;
  const change: ObserveChange = {};
  if (opts.observe !== undefined) change.observe = codesOf(entry, '--observe', opts.observe);
  if (opts.enforce !== undefined)
    change.enforce =
      opts.enforce.trim().toLowerCase() === 'all'
        ? 'all'
        : codesOf(entry, '--enforce', opts.enforce);
  const both = Array.isArray(change.enforce)
    ? (change.observe ?? []).filter((c) => (change.enforce as string[]).includes(c))
    : [];
  if (both.length > 0)
    throw usageError(`${both.join(', ')}: give a code to --observe or to --enforce, not both`);
  return change;
}

function codesOf(entry: ObserveEntry, flag: string, text: string): string[] {
  const parsed = parseObserveCodes(entry, text);
  if (!parsed.ok) throw usageError(`${flag}: ${parsed.problem}`);
  return parsed.codes;
}
