import { isObservableReason, type ObservableReason } from './observedRules.js';
import { Rejection, type RejectReason } from './reasons.js';
import type { CheckRecord, Trace, VerifyFacts } from './outcome.js';

/**
 * Collects the steps of one verification; `finish` fills in the failing and unreached checks.
 * It also collects the observed rules that failed: `policyFailed` is the one place that decides
 * whether a failing policy rule rejects (throws) or is observed (recorded, and the checks go on).
 */
export class TraceRecorder implements Trace {
  readonly facts: VerifyFacts = {};
  private readonly records: CheckRecord[] = [];
  private planned: string[] = [];
  private active: string | undefined;
  private observing: ReadonlySet<string> = new Set();
  private readonly observedFailures: ObservableReason[] = [];

  plan(ids: readonly string[]): void {
    this.planned.push(...ids.filter((id) => !this.planned.includes(id)));
  }

  pass(id: string, detail: string): void {
    this.records.push({ id, status: 'pass', detail });
    this.active = undefined;
  }

  skip(id: string, detail: string): void {
    this.records.push({ id, status: 'skip', detail });
    this.active = undefined;
  }

  current(id: string): void {
    this.active = id;
  }

  observe(codes: readonly string[]): void {
    this.observing = new Set(codes);
  }

  policyFailed(
    id: string,
    reason: ObservableReason,
    detail: string,
    enforcedAs?: RejectReason,
  ): void {
    // the table is checked too: a stored set can never turn an identity check into an observed one
    if (!isObservableReason(reason) || !this.observing.has(reason)) {
      this.active = id;
      throw new Rejection(enforcedAs ?? reason, detail);
    }
    this.records.push({ id, status: 'observed', detail, reason });
    if (!this.observedFailures.includes(reason)) this.observedFailures.push(reason);
    this.active = undefined;
  }

  /** The observed rules that failed so far, each once, in the order they first failed. */
  observed(): ObservableReason[] {
    return [...this.observedFailures];
  }

  /** The ordered list of checks: done ones, the failing one (if any), then unreached planned ones. */
  finish(failure?: { reason: RejectReason; detail: string }): CheckRecord[] {
    const out = [...this.records];
    if (failure)
      out.push({
        id: this.active ?? failure.reason,
        status: 'fail',
        detail: failure.detail,
        reason: failure.reason,
      });
    const seen = new Set(out.map((r) => r.id));
    for (const id of this.planned)
      if (!seen.has(id)) out.push({ id, status: 'skip', detail: 'not reached' });
    return out;
  }
}
