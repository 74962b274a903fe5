import { colorWanted } from '../config.js';
import type { ReceiptSummary } from '../core/apple/tokenReceipt.js';
import { checkTitle } from '../core/checkTitles.js';
import type { Hint } from '../core/explain.js';
import type { KeyMode } from '../core/ports.js';
import type { VerifyOutcome } from '../core/outcome.js';
import { printJson } from './output.js';
import { receiptLine } from './receiptReport.js';
import { paint, safeText } from './terminalText.js';

/** verify-file's report of one verification: its checks, verdict and hints, as text or JSON. */
export function verifyReport(
  outcome: VerifyOutcome,
  hints: Hint[],
  ctx: {
    at: Date;
    nonceChecked: boolean;
    json: boolean;
    offline: boolean;
    roots: string;
    mode: KeyMode;
    receipt: ReceiptSummary | null;
    /** android-key: --challenge replaced SHA-256(final nonce) as the attested challenge */
    challengeGiven?: boolean;
    /** verify-file --capture: the server's verdict beside this one (JSON field, and text lines) */
    capture?: { doc: Record<string, unknown>; lines: string[] };
  },
) {
  const checks = outcome.checks.map((c) => ({
    id: c.id,
    title: checkTitle(c.id) ?? c.id,
    status: c.status,
    detail: c.detail,
    ...(c.reason ? { reason: c.reason } : {}),
  }));
  if (ctx.json) {
    printJson({
      valid: outcome.ok,
      ...(outcome.ok ? {} : { reason: outcome.reason, detail: outcome.detail }),
      ...(outcome.ok && outcome.observed ? { observed: outcome.observed } : {}),
      verifiedAt: ctx.at.toISOString(),
      nonceChecked: ctx.nonceChecked,
      ...(ctx.challengeGiven ? { challenge: 'given' } : {}),
      source: ctx.offline ? 'flags' : 'database',
      trustRoots: ctx.roots,
      mode: ctx.mode,
      facts: outcome.facts,
      checks,
      ...(outcome.ok ? { details: outcome.details } : {}),
      ...(ctx.receipt
        ? {
            receipt: {
              valid: ctx.receipt.valid,
              present: ctx.receipt.present,
              type: ctx.receipt.type,
              creationTime: ctx.receipt.creationTime,
              expirationTime: ctx.receipt.expirationTime,
              riskMetric: ctx.receipt.riskMetric,
              problem: ctx.receipt.problem,
            },
          }
        : {}),
      hints,
      ...(ctx.capture ? { capture: ctx.capture.doc } : {}),
    });
    return;
  }
  // Token-controlled text (device.service, packageName, fmt, details) is in facts, details and
  // hints: every line is escaped whole, then coloured, so nothing from the token reaches the terminal raw.
  const p = paint(colorWanted(process.stdout.isTTY));
  const out: string[] = [];
  const line = (text: string) => out.push(safeText(text));
  const f = outcome.facts;
  line(
    `token: service ${f.service ?? '?'}${f.shape ? `, ${f.shape}` : ''}${f.appId ? `, app ${f.appId}` : ''}${f.packageName ? `, package ${f.packageName}` : ''}${f.keyId ? `, key ${f.keyId}` : ''}`,
  );
  line(
    `verified at ${ctx.at.toISOString()} against ${ctx.offline ? 'the flags given' : 'the configured database (read-only)'}, as a ${ctx.mode} API key would`,
  );
  if (!ctx.nonceChecked)
    out.push(p.yellow('nonce: NOT CHECKED (no --nonce or --server-nonce given)'));
  if (ctx.challengeGiven)
    out.push(
      p.yellow(
        'challenge: GIVEN (--challenge), not derived from the nonce: the attested challenge was compared with it, so the token is not shown to be bound to a request of this deployment',
      ),
    );
  out.push('');
  const mark = {
    pass: p.green('pass'),
    fail: p.red(p.bold('FAIL')),
    skip: p.dim('skip'),
    observed: p.yellow(p.bold('OBSV')),
  } as const;
  for (const c of checks) {
    out.push(`  [${mark[c.status]}] ${safeText(c.title)}`);
    const reason = c.reason
      ? ` (${c.reason}${c.status === 'observed' ? ': failed, observed, not enforced' : ''})`
      : '';
    line(`         ${c.id}: ${c.detail}${reason}`);
  }
  out.push('');
  if (ctx.receipt) out.push(receiptLine(ctx.receipt), '');
  if (outcome.ok) {
    const { service, ...details } = outcome.details;
    out.push(`${p.green(p.bold('VALID'))}${safeText(` (${service}): ${JSON.stringify(details)}`)}`);
    if (outcome.observed)
      line(
        `  observed rules failed: ${outcome.observed.join(', ')} (recorded; the entry does not enforce them)`,
      );
  } else {
    out.push(`${p.red(p.bold('REJECTED'))}${safeText(`: ${outcome.reason}: ${outcome.detail}`)}`);
    const remedy = outcome.facts.remediation;
    if (remedy)
      line(
        `  the user can fix it on the device: Play dialog ${remedy.dialog} (showDialog type code ${remedy.typeCode})`,
      );
    for (const h of hints) line(`  hint (${h.code}): ${h.message}`);
    if (hints.length === 0) out.push('  no common integration mistake explains it');
  }
  if (ctx.capture) out.push('', ...ctx.capture.lines.map(safeText));
  process.stdout.write(`${out.join('\n')}\n`);
}
