import type { AppScope } from './appScope.js';
import { bytesEqual } from './bytesEqual.js';
import { isMap } from './cbor.js';
import { parseEnvelope } from './envelope.js';
import { Rejection } from './reasons.js';
import { TraceRecorder } from './trace.js';
import type { PlatformVerifier } from './ports.js';
import type { Service } from './services.js';
import type { VerifyOutcome } from './outcome.js';

/** A device nonce's size (docs/token-format.md section 2). */
export const DEVICE_NONCE_BYTES = { min: 1, max: 128 } as const;

/** The session approach's final nonce (docs/token-format.md section 2): serverNonce, or serverNonce || deviceNonce. */
export function finalNonce(
  serverNonce: Uint8Array,
  deviceNonce: Uint8Array | null | undefined,
): Uint8Array {
  return deviceNonce ? new Uint8Array(Buffer.concat([serverNonce, deviceNonce])) : serverNonce;
}

export interface VerifyInput {
  /** the token's CBOR bytes */
  token: Uint8Array;
  /** the final nonce rebuilt by the caller; `null` = not checked (verify-file without a nonce flag) */
  expectedNonce: Uint8Array | null;
  /** verify-file only: replaces SHA-256(finalNonce) as App Attest clientDataHash */
  clientDataHash?: Uint8Array;
  /** verify-file only: replaces SHA-256(finalNonce) as the Android attestation challenge */
  challenge?: Uint8Array;
  /** the verifying API key's apps (`keys create --apps`); absent or null = every allowlisted app */
  appScope?: AppScope;
}

export type PlatformVerifiers = Partial<Record<Service, PlatformVerifier>>;

export interface VerifyDeps {
  now: () => Date;
  verifiers: PlatformVerifiers;
}

/** The ordered envelope checks, before the platform's own. */
export const ENVELOPE_CHECKS = [
  'token.decode',
  'token.version',
  'token.service',
  'token.nonce',
] as const;

/**
 * Verifies one token end to end: envelope, nonce, then the platform verifier of `device.service`.
 * Expected rejections come back as `{ ok: false, reason }`; faults (a store that is down) throw.
 * The server and `verify-file` both call this, so their verdicts cannot differ.
 */
export async function verifyToken(input: VerifyInput, deps: VerifyDeps): Promise<VerifyOutcome> {
  const trace = new TraceRecorder();
  trace.plan(ENVELOPE_CHECKS);
  try {
    const envelope = parseEnvelope(input.token, trace);

    trace.current('token.service');
    const verifier = deps.verifiers[envelope.service as Service];
    if (!verifier || !Object.hasOwn(deps.verifiers, envelope.service)) {
      throw new Rejection(
        'service_unsupported',
        `device.service "${truncate(envelope.service)}" has no verifier`,
      );
    }
    trace.facts.service = verifier.service;
    if (!isMap(envelope.evidence)) {
      throw new Rejection('token_malformed', `the "${verifier.service}" evidence map is missing`);
    }
    trace.pass('token.service', `device.service is "${verifier.service}"`);

    trace.current('token.nonce');
    if (input.expectedNonce === null) {
      trace.skip('token.nonce', 'no expected nonce was given: the token nonce was not checked');
    } else {
      if (!bytesEqual(envelope.nonce, input.expectedNonce)) {
        throw new Rejection(
          'nonce_mismatch',
          `token nonce (${envelope.nonce.length} bytes) differs from the final nonce (${input.expectedNonce.length} bytes)`,
        );
      }
      trace.pass(
        'token.nonce',
        `token nonce equals the final nonce (${envelope.nonce.length} bytes)`,
      );
    }

    const details = await verifier.verify(envelope.evidence, {
      nonce: envelope.nonce,
      now: deps.now(),
      ...(input.clientDataHash ? { clientDataHash: input.clientDataHash } : {}),
      ...(input.challenge ? { challenge: input.challenge } : {}),
      ...(input.appScope ? { appScope: input.appScope } : {}),
      trace,
    });
    // the verdict: an enforced rule that failed threw above; observed ones that failed are listed
    const observed = trace.observed();
    return {
      ok: true,
      details,
      checks: trace.finish(),
      facts: trace.facts,
      ...(observed.length > 0 ? { observed } : {}),
    };
  } catch (err) {
    if (!(err instanceof Rejection)) throw err;
    return {
      ok: false,
      reason: err.reason,
      detail: err.detail,
      checks: trace.finish(err),
      facts: trace.facts,
    };
  }
}

function truncate(s: string): string {
  return s.length > 32 ? `${s.slice(0, 32)}…` : s;
}
