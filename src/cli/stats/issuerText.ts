import { formatDeviceLimit } from '../../core/policyFields.js';
import type { IssuerUsage } from '../../db/issuerVelocity.js';
import type { StatsMode } from '../../db/statsDimensions.js';
import { safeText } from '../terminalText.js';
import { modeText } from './statsSummary.js';

/**
 * `attest stats`' view of the leaked-keybox defence: the issuing certificates nearest their
 * package's `--max-keys-per-issuer` in its current window (the `--mode`'s keys: live unless asked;
 * each mode counts apart, so `all` shows a MODE column), fullest first.
 */
export function issuerText(issuers: readonly IssuerUsage[], mode: StatsMode = 'live'): string {
  if (issuers.length === 0) return '';
  const rows = issuers.map((u) => [
    safeText(u.packageName),
    u.serial,
    `${u.count}/${formatDeviceLimit({ max: u.max, periodSeconds: u.periodSeconds })}`,
    ...(mode === 'all' ? [u.mode] : []),
    u.windowStart.toISOString(),
    safeText(u.subject),
  ]);
  const head = [
    'PACKAGE',
    'ISSUER SERIAL',
    'NEW KEYS/LIMIT',
    ...(mode === 'all' ? ['MODE'] : []),
    'WINDOW FROM',
    'ISSUER',
  ];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  return [
    '',
    `issuing certificates nearest --max-keys-per-issuer (current windows, ${modeText(mode)}; a count above the limit is an observed rule):`,
    line(head),
    ...rows.map(line),
    '',
  ].join('\n');
}

/** The same as JSON (`attest stats --json`'s `issuers`). */
export function issuerJson(issuers: readonly IssuerUsage[]) {
  return issuers.map((u) => ({
    packageName: u.packageName,
    serial: u.serial,
    subject: u.subject,
    mode: u.mode,
    count: u.count,
    max: u.max,
    periodSeconds: u.periodSeconds,
    windowStart: u.windowStart.toISOString(),
    lastAt: u.lastAt.toISOString(),
  }));
}
