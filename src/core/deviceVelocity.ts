/**
 * Per-device velocity (`allowlist add apple|android --max-verifies-per-device N/PERIOD`): a
 * registered key (an App Attest key, an android-key key) may pass at most N verifies in each fixed
 * window of PERIOD. Play Integrity tokens name no device and are never counted.
 */
import { encodeBase64 } from './base64.js';
import type { DeviceKeyService } from './services.js';
import type { RejectReason } from './reasons.js';
import type { DeviceLimit, DeviceVelocityStore, KeyMode } from './ports.js';
import type { Trace } from './outcome.js';

/** The limits an operator may set: N from 1, PERIOD from one minute to 30 days. */
export const DEVICE_LIMIT_BOUNDS = {
  maxVerifies: { min: 1, max: 1_000_000 },
  periodSeconds: { min: 60, max: 30 * 86_400 },
} as const;

/** Whether `limit` is within DEVICE_LIMIT_BOUNDS (whole numbers). */
export function isDeviceLimit(limit: DeviceLimit): boolean {
  const { maxVerifies, periodSeconds } = DEVICE_LIMIT_BOUNDS;
  return (
    Number.isSafeInteger(limit.max) &&
    limit.max >= maxVerifies.min &&
    limit.max <= maxVerifies.max &&
    Number.isSafeInteger(limit.periodSeconds) &&
    limit.periodSeconds >= periodSeconds.min &&
    limit.periodSeconds <= periodSeconds.max
  );
}

/**
 * The start of the fixed window holding `now`: floor(now / period) * period since the Unix
 * epoch, so every instance puts a verify in the same window whatever it started at (`1d` windows
 * begin at 00:00 UTC).
 */
export function windowStartOf(now: Date, periodSeconds: number): Date {
  const ms = periodSeconds * 1000;
  return new Date(Math.floor(now.getTime() / ms) * ms);
}

/** The step's outcome: the verifier hands a failure to `trace.policyFailed` (reject, or observe). */
export type PolicyOutcome =
  | { ok: true }
  | { ok: false; reason: Extract<RejectReason, 'device_rate_exceeded'>; detail: string };

export interface DeviceVelocityInput {
  check: 'apple.deviceVelocity' | 'android.deviceVelocity';
  service: DeviceKeyService;
  keyId: Uint8Array;
  /** the app ID or package, for the detail */
  owner: string;
  /** the entry's limit; absent or null: nothing is counted */
  limit: DeviceLimit | null | undefined;
  /** absent: a limit is a fault (a verifier wired without the shared counts must not guess) */
  store: DeviceVelocityStore | undefined;
  /** the API key's mode: test keys count apart from live ones (default live) */
  mode?: KeyMode;
  now: Date;
  trace: Trace;
}

/**
 * The per-device velocity policy step: counts this verify in the key's current window if the
 * window holds fewer than the limit (one atomic statement of the store), else fails without
 * counting. It runs after every other check of the verification has passed, so only accepted
 * verifies count: a refused attempt (a replay, a bad signature, one past the limit) never adds to
 * the count, and nobody can lock a device out by sending what it will refuse. Live and test keys
 * count apart. It never throws a Rejection: the verifier decides what a failure does (reason
 * `device_rate_exceeded`; observed, the verify is accepted and still not counted past N).
 */
export async function checkDeviceVelocity(input: DeviceVelocityInput): Promise<PolicyOutcome> {
  const { trace, limit, check } = input;
  if (!limit) {
    trace.skip(check, `${input.owner} sets no per-device limit`);
    return { ok: true };
  }
  if (!input.store)
    throw new Error(
      `${input.owner} sets a per-device limit but this verifier has no device velocity store`,
    );
  const windowStart = windowStartOf(input.now, limit.periodSeconds);
  trace.current(check);
  const count = await input.store.count({
    keyId: input.keyId,
    mode: input.mode ?? 'live',
    service: input.service,
    windowStart,
    periodSeconds: limit.periodSeconds,
    max: limit.max,
    at: input.now,
  });
  const window = `the window from ${windowStart.toISOString()} (${limit.periodSeconds} s)`;
  if (count === null)
    return {
      ok: false,
      reason: 'device_rate_exceeded',
      detail: `key ${encodeBase64(input.keyId)} already made ${limit.max} valid verifies in ${window}; ${input.owner} allows ${limit.max} (this one is not counted)`,
    };
  trace.pass(check, `verify ${count} of at most ${limit.max} in ${window}`);
  return { ok: true };
}
