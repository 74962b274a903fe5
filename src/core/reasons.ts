import type { KindReason } from './kinds.js';

/**
 * The reasons no one kind owns (docs/token-format.md section 7): the envelope's and the session's,
 * and the policy steps several kinds share. Each kind declares its own in its descriptor; the
 * whole list is REJECT_REASONS (rejectReasons.ts).
 */
export const SHARED_REASONS = [
  'token_malformed',
  'token_version_unsupported',
  'service_unsupported',
  'session_unknown',
  'session_consumed',
  'session_expired',
  'nonce_mismatch',
  // the token's app is allowlisted but outside the API key's scope (`keys create --apps`)
  'app_not_in_key_scope',
  'device_rate_exceeded',
] as const;

/** Every rejection reason: a closed union, compile-checked. */
export type RejectReason = (typeof SHARED_REASONS)[number] | KindReason;

/**
 * An expected rejection. Thrown inside core checks and turned into `{ ok: false }` by the
 * top-level verifier only; anything else that is thrown is a fault (HTTP 500).
 */
export class Rejection extends Error {
  override readonly name = 'Rejection';
  constructor(
    readonly reason: RejectReason,
    readonly detail: string,
  ) {
    // an expected outcome, turned into a value and never logged with a stack: capturing one was
    // most of the CPU a garbage token costs (~7 us per error at a request's call depth)
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(`${reason}: ${detail}`);
    Error.stackTraceLimit = limit;
  }
}
