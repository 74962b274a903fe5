import type { Command } from 'commander';
import { observableCodes, parseObserveCodes, type ObserveEntry } from '../../core/observedRules.js';
import type { ObserveChange } from '../../db/observeColumn.js';
import { STATS_MODES, type RolloutRule, type StatsMode } from '../../db/statsDimensions.js';
import type { Admin } from '../admin.js';
import { usageError } from '../errors.js';
import { modeText, shareText } from '../stats/statsSummary.js';

/** The observed-rule flags of `allowlist add apple|android`. */
export interface ObserveFlags {
  observe?: string;
  enforce?: string;
  /** whose verifies the --enforce report counts (live, test, all; default live) */
  mode?: string;
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
    )
    .option(
      '--mode <mode>',
      `whose verifies the --enforce report counts: ${STATS_MODES.join(', ')} (default live)`,
    );
}

/** The mode the rollout report of an observed-rule change counts (checked: exit 2). */
export function observeMode(opts: ObserveFlags): StatsMode {
  const mode = opts.mode ?? 'live';
  if (!(STATS_MODES as readonly string[]).includes(mode))
    throw usageError(`--mode takes one of ${STATS_MODES.join(', ')}, got "${mode}"`);
  return mode as StatsMode;
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

/**
 * The rules' counts before an observed-rule change, when it enforces some (to say what their
 * share was); nothing to read otherwise.
 */
export async function rolloutBefore(
  admin: Admin,
  app: string,
  change: ObserveChange | undefined,
  mode: StatsMode = 'live',
): Promise<readonly RolloutRule[]> {
  if (change?.enforce === undefined) return [];
  return admin.run('stats.rollout', { until: new Date(), app, mode });
}

/**
 * What to read after an observed-rule change: for each rule now observed, the command that shows
 * its share; for each rule enforced, what its share was while it was observed.
 */
export function rolloutNote(
  app: string,
  change: ObserveChange | undefined,
  before: readonly RolloutRule[],
  mode: StatsMode = 'live',
): string {
  if (!change) return '';
  const lines: string[] = [];
  if (change.observe?.length)
    lines.push(
      `observing ${change.observe.join(', ')}: the share it would turn away, counted from now: attest stats --app ${app} (live keys; a rehearsal with test keys: --mode test)`,
    );
  const enforced =
    change.enforce === 'all'
      ? before
      : before.filter((r) => (change.enforce as string[] | undefined)?.includes(r.reason));
  for (const r of enforced)
    lines.push(
      r.observedSince
        ? `${r.reason} enforced: while observed (since ${r.observedSince.toISOString().slice(0, 19)}Z) it would have rejected ${r.wouldReject} of ${r.valid} valid verifies of ${modeText(mode)} (${shareText(r.share)})${r.devices ? `, ${r.wouldRejectDevices} of ${r.devices} devices` : ''}`
        : `${r.reason} enforced: the audit trail does not say since when it was observed, so there is no share to show`,
    );
  return lines.map((l) => `${l}\n`).join('');
}
