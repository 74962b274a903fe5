import type { RejectReason } from './reasons.js';
import type { CheckRecord, Trace, VerifyFacts } from './types.js';

/** Collects the steps of one verification; `finish` fills in the failing and unreached checks. */
export class TraceRecorder implements Trace {
  readonly facts: VerifyFacts = {};
  private readonly records: CheckRecord[] = [];
  private planned: string[] = [];
  private active: string | undefined;

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
