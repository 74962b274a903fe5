import type {
  RolloutRule,
  StatsDimension,
  StatsMode,
  StatsTotal,
} from '../../db/statsDimensions.js';
import { safeText } from '../terminalText.js';

/** The counts of one value of the `--by` dimension (an app, by default). */
export interface StatsGroup {
  /** null: unknown (a token that named no app, a request that failed before its key was known) */
  value: string | null;
  valid: number;
  rejected: number;
  observed: number;
  error: number;
  /** largest first */
  rejectedReasons: { reason: string; count: number }[];
  observedReasons: { reason: string; count: number }[];
}

/** Sums the totals per value: the busiest value first, or in time order by minute. */
export function groupTotals(
  totals: readonly StatsTotal[],
  by: StatsDimension = 'app',
): StatsGroup[] {
  const groups = new Map<string | null, StatsGroup>();
  for (const t of totals) {
    let g = groups.get(t.value);
    if (!g) {
      g = {
        value: t.value,
        valid: 0,
        rejected: 0,
        observed: 0,
        error: 0,
        rejectedReasons: [],
        observedReasons: [],
      };
      groups.set(t.value, g);
    }
    g[t.outcome] += t.count;
    if (t.reason !== null && t.outcome === 'rejected')
      g.rejectedReasons.push({ reason: t.reason, count: t.count });
    if (t.reason !== null && t.outcome === 'observed')
      g.observedReasons.push({ reason: t.reason, count: t.count });
  }
  const byCount = (a: { count: number; reason: string }, b: { count: number; reason: string }) =>
    b.count - a.count || a.reason.localeCompare(b.reason);
  const list = [...groups.values()];
  for (const g of list) {
    g.rejectedReasons.sort(byCount);
    g.observedReasons.sort(byCount);
  }
  const total = (g: StatsGroup) => g.valid + g.rejected + g.error;
  // minutes are ISO times: their text order is time order
  if (by === 'minute')
    return list.sort((a, b) => String(a.value ?? '').localeCompare(String(b.value ?? '')));
  return list.sort(
    (a, b) => total(b) - total(a) || String(a.value ?? '').localeCompare(String(b.value ?? '')),
  );
}

/** How a value with no name reads in the views. */
export function valueLabel(value: string | null, by: StatsDimension): string {
  if (value !== null) return value;
  return by === 'reason' ? '(none)' : '(unknown)';
}

/** `code 12, other 3, +2 more`: the top `n` reasons. */
export function topReasons(reasons: readonly { reason: string; count: number }[], n = 3): string {
  const shown = reasons.slice(0, n).map((r) => `${r.reason} ${r.count}`);
  if (reasons.length > n) shown.push(`+${reasons.length - n} more`);
  return shown.join(', ');
}

const HEADER: Record<StatsDimension, string> = {
  app: 'APP',
  reason: 'REASON',
  key: 'API KEY',
  service: 'SERVICE',
  minute: 'MINUTE',
};

/**
 * The default text of `attest stats`: per value of the `by` dimension, valid / rejected /
 * observed / error, and under each the top rejected and observed reasons. Stored text (app ids
 * come from tokens) is escaped for the terminal.
 */
export function statsText(
  totals: readonly StatsTotal[],
  by: StatsDimension,
  window: { since: Date; until: Date; mode?: StatsMode },
): string {
  const head = `verifications of ${modeText(window.mode ?? 'live')} from ${iso(window.since)} to ${iso(window.until)} (all instances)\n`;
  const groups = groupTotals(totals, by);
  if (groups.length === 0) return `${head}no verifications counted in this window\n`;
  const names = groups.map((g) => safeText(valueLabel(g.value, by)));
  const width = Math.max(HEADER[by].length, ...names.map((n) => n.length));
  const num = (n: number | string) => String(n).padStart(9);
  const lines = [
    `${HEADER[by].padEnd(width)}  ${num('VALID')}  ${num('REJECTED')}  ${num('OBSERVED')}  ${num('ERROR')}`,
  ];
  groups.forEach((g, i) => {
    lines.push(
      `${names[i]!.padEnd(width)}  ${num(g.valid)}  ${num(g.rejected)}  ${num(g.observed)}  ${num(g.error)}`,
    );
    // by reason, each line is a reason already
    if (by === 'reason') return;
    if (g.rejectedReasons.length)
      lines.push(`  rejected: ${safeText(topReasons(g.rejectedReasons))}`);
    if (g.observedReasons.length)
      lines.push(`  observed: ${safeText(topReasons(g.observedReasons))}`);
  });
  // OBSERVED counts each observed rule's failures: with two rules it may exceed VALID
  lines.push(
    'OBSERVED: failures of observed rules (each rule once per verify); those verifies are in VALID',
  );
  return `${head}${lines.join('\n')}\n`;
}

/** Whose verifies a figure counts, as the views say it. */
export function modeText(mode: StatsMode): string {
  return mode === 'all' ? 'live and test keys' : `${mode} keys`;
}

/** `12.5%`, or `-` when there was nothing to share. */
export function shareText(share: number | null): string {
  return share === null ? '-' : `${(share * 100).toFixed(1)}%`;
}

/**
 * The rollout view: per observed rule, what enforcing it would have done to the verifies since
 * it was observed (each rule from its own time in the audit trail, not from --since).
 */
export function rolloutText(rules: readonly RolloutRule[]): string {
  if (rules.length === 0) return '';
  const rows = rules.map((r) => [
    safeText(r.app),
    r.reason,
    r.observedSince ? iso(r.observedSince) : '(not in the audit trail)',
    String(r.verifies),
    String(r.valid),
    String(r.wouldReject),
    shareText(r.share),
    devicesText(r),
  ]);
  const head = [
    'APP',
    'OBSERVED RULE',
    'SINCE',
    'VERIFIES',
    'VALID',
    'WOULD REJECT',
    'SHARE',
    'DEVICES',
  ];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i < 3 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [
    '',
    `observed rules, each counted from the minute it was observed (${modeText(rules[0]!.mode)}, all instances, every key unless --key):`,
    line(head),
    ...rows.map(line),
    'SHARE: of the valid verifies since then, those the rule failed: what --enforce would have turned away',
    'DEVICES: distinct devices the rule failed / with a valid verify since then (App Attest and android-key keys; Play Integrity names no device; - with --key)',
    '',
  ].join('\n');
}

/** `3/40`: distinct devices the rule failed, of those with a valid verify; `-` when not counted. */
export function devicesText(r: Pick<RolloutRule, 'devices' | 'wouldRejectDevices'>): string {
  return r.devices === null || r.wouldRejectDevices === null
    ? '-'
    : `${r.wouldRejectDevices}/${r.devices}`;
}

function iso(d: Date): string {
  return `${d.toISOString().slice(0, 19)}Z`;
}
