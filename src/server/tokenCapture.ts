import type { Logger } from 'pino';
import type { CaptureMax, CaptureMode } from '../captureBound.js';
import { kindOf } from '../core/kinds.js';
import type { VerifyOutcome } from '../core/outcome.js';
import type { KeyMode } from '../core/ports.js';
import type { VerifyInput } from '../core/verify.js';
import type { CaptureRepository } from '../db/captures.js';
import type { SecretBox } from '../db/secretBox.js';
import { describeFault } from './app.js';

/** Capture writes in flight at once; a verify beyond it is not captured (and not slowed). */
export const CAPTURE_WRITES_IN_FLIGHT = 4;

/** One verify as the server saw it. */
export interface VerifySeen {
  input: VerifyInput;
  mode: KeyMode;
  apiKeyId: string;
  /** the verifier's clock for this verify */
  at: Date;
  outcome: VerifyOutcome;
}

export interface TokenCapturer {
  /** keeps the token of `seen` when ATTEST_CAPTURE asks for it; never throws, never waits */
  capture(seen: VerifySeen): void;
  /** resolves once the writes under way are done (tests; shutdown) */
  idle(): Promise<void>;
}

/**
 * Keeps tokens for replay (ATTEST_CAPTURE): after a verify has its answer, its token and context
 * are written in the background, at most CAPTURE_WRITES_IN_FLIGHT at once. A verify never waits
 * for a capture and never fails by one: a failed or skipped write is a log line (the first of a
 * run of skips, not one per request).
 */
export function createTokenCapturer(deps: {
  mode: CaptureMode;
  max: CaptureMax;
  repo: Pick<CaptureRepository, 'record'>;
  box: SecretBox;
  logger: Logger;
  maxInFlight?: number;
}): TokenCapturer {
  const maxInFlight = deps.maxInFlight ?? CAPTURE_WRITES_IN_FLIGHT;
  const writes = new Set<Promise<void>>();
  let skipping = false;
  return {
    capture({ input, mode, apiKeyId, at, outcome }) {
      if (deps.mode === 'off' || (deps.mode === 'rejected' && outcome.ok)) return;
      // the server always checks a nonce; a verify without one is not a server's verify
      if (input.expectedNonce === null) return;
      if (writes.size >= maxInFlight) {
        if (!skipping)
          deps.logger.warn(
            { inFlight: writes.size },
            'token captures are behind: this verify and others are not captured until the writes under way end',
          );
        skipping = true;
        return;
      }
      const service = outcome.facts.service ?? null;
      const write = deps.repo
        .record(
          {
            verifiedAt: at,
            mode,
            apiKeyId,
            appScope: input.appScope ? [...input.appScope] : null,
            nonce: input.expectedNonce,
            service,
            app: outcome.facts.appId ?? outcome.facts.packageName ?? null,
            entry: (service === null ? undefined : kindOf(service)?.entry) ?? null,
            valid: outcome.ok,
            reason: outcome.ok ? null : outcome.reason,
            detail: outcome.ok ? null : outcome.detail,
            checks: outcome.checks,
            token: input.token,
          },
          deps.box,
          deps.max,
        )
        .then(
          () => {
            skipping = false;
          },
          (err: unknown) =>
            deps.logger.warn({ err: describeFault(err) }, 'could not keep a token capture'),
        )
        .finally(() => writes.delete(write));
      writes.add(write);
    },
    async idle() {
      while (writes.size > 0) await Promise.all([...writes]);
    },
  };
}
