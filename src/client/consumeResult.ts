import { AttestResponseError, at } from './errors.js';
import type { ResultTokenClaims } from '../core/resultTokenClaims.js';
import { CONSUME_RESPONSE, validate } from './shapes.js';

/**
 * A consume answer (HTTP 200). Act on a result (a payment, a ledger entry) only when `valid` is
 * true and `alreadyConsumed` false: that answer is given once per token, across every instance.
 * `valid: false` (tampered, another signer, expired, a test token with a live key or the reverse,
 * an app outside a scoped key's apps) never says why; the reason is in the service's log.
 */
export type ConsumeResult =
  { valid: true; alreadyConsumed: boolean; claims: ResultTokenClaims } | { valid: false };

/** The typed result of a consume's 200 body, or an AttestResponseError for any other shape. */
export function consumeResultOf(
  json: unknown,
  answer: { url: URL; requestId: string | undefined },
): ConsumeResult {
  const problem = validate(CONSUME_RESPONSE, json);
  if (problem) throw at(new AttestResponseError('consume', problem, answer.requestId), answer.url);
  const result = json as { valid: boolean; alreadyConsumed?: boolean; claims?: ResultTokenClaims };
  if (result.valid !== true) return { valid: false };
  // a valid answer without both would leave the caller guessing whether to act on it
  if (result.alreadyConsumed === undefined || result.claims === undefined)
    throw at(
      new AttestResponseError(
        'consume',
        'valid true needs alreadyConsumed and claims',
        answer.requestId,
      ),
      answer.url,
    );
  return { valid: true, alreadyConsumed: result.alreadyConsumed, claims: result.claims };
}
