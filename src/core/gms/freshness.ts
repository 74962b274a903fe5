import type { CheckId } from '../checkTitles.js';
import { Rejection, type RejectReason } from '../reasons.js';
import type { Trace } from '../outcome.js';

/** How far ahead of the verification clock a Google timestamp may be (clock skew). */
export const MAX_FUTURE_SKEW_MS = 60_000;

/**
 * Play's freshness check, the same for phone and PC tokens: the time Google states (`issued` or
 * `requested`, per `verb`) is at most `maxAgeSeconds` old and at most a minute ahead of `now`;
 * the time is the verification's `issuedAt` fact.
 */
export function checkFreshness(
  at: number,
  maxAgeSeconds: number,
  ctx: { now: Date; trace: Trace },
  what: { check: CheckId; reason: RejectReason; verb: 'issued' | 'requested' },
): void {
  const { trace } = ctx;
  const { verb } = what;
  trace.current(what.check);
  trace.facts.issuedAt = new Date(at).toISOString();
  const ageMs = ctx.now.getTime() - at;
  if (ageMs > maxAgeSeconds * 1000)
    throw new Rejection(
      what.reason,
      `${verb} ${seconds(ageMs)} s ago, more than the ${maxAgeSeconds} s allowed`,
    );
  if (-ageMs > MAX_FUTURE_SKEW_MS)
    throw new Rejection(
      what.reason,
      `${verb} ${seconds(-ageMs)} s in the future, more than the ${MAX_FUTURE_SKEW_MS / 1000} s allowed`,
    );
  trace.pass(
    what.check,
    ageMs >= 0
      ? `${verb} ${seconds(ageMs)} s ago (at most ${maxAgeSeconds} s)`
      : `${verb} ${seconds(-ageMs)} s ahead of the clock (at most ${MAX_FUTURE_SKEW_MS / 1000} s)`,
  );
}

/** Milliseconds as seconds, up to three decimals. */
export function seconds(ms: number): string {
  return (ms / 1000).toFixed(3).replace(/\.?0+$/, '');
}
