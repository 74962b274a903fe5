import type { Command } from 'commander';
import type { VerifyOutcome } from '../core/outcome.js';
import type { CaptureRecord } from '../db/captures.js';
import type { AuditSummary } from '../db/audit.js';
import { captureId } from './commands/captures.js';
import { auditorFor, withAdmin } from './context.js';
import { CliError, EXIT, usageError } from './errors.js';

/** verify-file's flags that --capture replaces with the server's own context. */
const REPLACED = ['nonce', 'serverNonce', 'deviceNonce', 'at', 'devRoots', 'keyApps'] as const;

/**
 * `verify-file --capture ID`: the capture's token and the server's context (final nonce,
 * instant, API key mode and scope), read with the audit event `capture.read`. A flag that would
 * give any of them, or a token file, is a usage error: the replay is the server's verify.
 */
export async function readCaptureForReplay(
  idText: string,
  tokenPath: string | undefined,
  opts: Record<string, unknown>,
  command: Command,
  offline: boolean,
): Promise<CaptureRecord> {
  const id = captureId(idText);
  if (tokenPath !== undefined)
    throw usageError('--capture replays a kept token: give no TOKEN file with it');
  const given = REPLACED.find((k) => opts[k] !== undefined && opts[k] !== false);
  if (given || offline)
    throw usageError(
      `--capture verifies with the server's own context and the database's allowlist: leave out ${given ? `--${given.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}` : '--app-id, --package and --apple-key'}`,
    );
  const capture = await withAdmin(
    (admin) => admin.run('captures.read', { id, purpose: 'verify-file' }),
    { auditor: auditorFor(command), establish: false },
  );
  if (!capture) throw new CliError(`no capture ${id} (pruned, or never kept)`, EXIT.negative);
  return capture;
}

/** What changed in an allowlist entry between two audit summaries (one line each). */
export function policyChanges(
  app: string | null,
  before: AuditSummary | null,
  after: AuditSummary | null,
): string[] {
  const name = app ?? 'the app';
  if (before === null && after === null) return [];
  if (before === null) return [`the allowlist entry of ${name} was added since`];
  if (after === null) return [`the allowlist entry of ${name} was removed since`];
  const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])];
  return keys
    .filter((k) => JSON.stringify(before[k] ?? null) !== JSON.stringify(after[k] ?? null))
    .map(
      (k) =>
        `${name}'s ${k} changed: ${JSON.stringify(before[k] ?? null)} then, ${JSON.stringify(after[k] ?? null)} now`,
    );
}

/** The server's verdict beside the replay's: verifyReport's `capture` (JSON field and text lines). */
export function captureComparison(capture: CaptureRecord, outcome: VerifyOutcome) {
  const replayReason = outcome.ok ? null : outcome.reason;
  const same = capture.valid === outcome.ok && capture.reason === replayReason;
  const changes = policyChanges(capture.app, capture.policy, capture.policyNow);
  const verdict = (valid: boolean, reason: string | null) =>
    valid ? 'accepted' : `rejected (${reason})`;
  const lines = [
    `capture ${capture.id}: the server ${verdict(capture.valid, capture.reason)} it at ${capture.verifiedAt.toISOString()} for ${capture.mode} API key ${capture.apiKeyId}`,
    same
      ? 'this replay gives the same verdict and reason'
      : `this replay ${verdict(outcome.ok, replayReason)} it: not what the server answered`,
    ...changes.map((c) => `policy changed: ${c}`),
  ];
  if (!same && changes.length === 0)
    lines.push(
      "the app's allowlist entry is as it was: what changed is other state (a key registered or its counter moved on, the status list, the development CA, the API key) or attest itself",
    );
  return {
    doc: {
      id: capture.id,
      verifiedAt: capture.verifiedAt.toISOString(),
      apiKeyId: capture.apiKeyId,
      server: { valid: capture.valid, reason: capture.reason, detail: capture.detail },
      same,
      policyChanges: changes,
    },
    lines,
  };
}
