import { Rejection } from '../reasons.js';
import type { Trace } from '../outcome.js';

/**
 * A trace that records nothing, for callers of the check functions that want no report. Without
 * a collector nothing can be observed: every failing policy rule rejects.
 */
export function silentTrace(): Trace {
  return {
    plan() {},
    pass() {},
    skip() {},
    current() {},
    observe() {},
    policyFailed(_id, reason, detail, enforcedAs) {
      throw new Rejection(enforcedAs ?? reason, detail);
    },
    facts: {},
  };
}
