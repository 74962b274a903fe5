/**
 * Hints for `verify-file`: after a rejection, re-run the verification with the alternative that a
 * common integration mistake would produce, and name the mistake only when that re-run gets
 * further. Nothing here guesses; every hint is backed by a verification that progressed.
 */
import { encodeBase64, encodeBase64Url } from './base64.js';
import type { AllowlistReader } from './ports.js';
import type { VerifyOutcome } from './outcome.js';
import { bytesEqual } from './bytesEqual.js';
import type { VerifyInput } from './verify.js';
import { parseEnvelope } from './envelope.js';
import { sha256, utf8, type HintRun } from './hintRun.js';
import { KINDS } from './kinds.js';

/** Each kind's hints, tried after the nonce's: a kind's own rejections are named by its prefix. */
const KIND_HINTS = KINDS.flatMap((k) => (k.hints ? [k.hints] : []));

export interface Hint {
  /** stable code (documented in the README) */
  code:
    | 'nonce_base64_text'
    | 'nonce_hashed_by_device'
    | 'device_nonce_missing'
    | 'device_nonce_not_used'
    | 'raw_nonce_as_client_data_hash'
    | 'environment_not_allowed'
    | 'mac_development_aaguid'
    | 'platform_not_allowed'
    | 'team_id_mismatch'
    | 'app_not_allowlisted'
    | 'other_package_keys'
    | 'token_age'
    | 'leaf_expired'
    | 'counter_replay'
    | 'test_keys_only'
    | 'verdict_not_opted_in'
    | 'not_licensed'
    | 'play_protect_risk'
    | 'app_access_risk'
    | 'device_activity_high'
    | 'device_recalled'
    | 'account_activity_low'
    | 'location_spoofing_risk'
    | 'challenge_derivation'
    | 'software_key'
    | 'emulator'
    | 'unknown_root'
    | 'device_unlocked'
    | 'self_signed_os'
    | 'certificate_revoked'
    | 'patch_stale'
    | 'level_claim_mismatch'
    | 'patch_future'
    | 'key_not_generated'
    | 'assertion_replayed';
  message: string;
}

export interface ExplainContext {
  input: VerifyInput;
  at: Date;
  /** the session parts, when the nonce was given as --server-nonce/--device-nonce */
  serverNonce?: Uint8Array;
  deviceNonce?: Uint8Array;
  allowlist: AllowlistReader;
  /** runs the same verification read-only, optionally with another allowlist or instant */
  run(
    input: VerifyInput,
    options?: { allowlist?: AllowlistReader; at?: Date },
  ): Promise<VerifyOutcome>;
}

type Rejected = Extract<VerifyOutcome, { ok: false }>;

/** Hints for a rejection, each confirmed by a re-run that got past the failing check. */
export async function findHints(outcome: Rejected, ctx: ExplainContext): Promise<Hint[]> {
  const hints: Hint[] = [];
  const progressed = (retry: VerifyOutcome) => retry.ok || failedAt(retry) > failedAt(outcome);
  const tryWith = async (
    input: Partial<VerifyInput>,
    options?: { allowlist?: AllowlistReader; at?: Date },
  ) => progressed(await ctx.run({ ...ctx.input, ...input }, options));

  let envelope: ReturnType<typeof parseEnvelope> | null = null;
  try {
    envelope = parseEnvelope(ctx.input.token);
  } catch {
    return hints; // nothing to re-try on a token that does not parse
  }
  const tokenNonce = envelope.nonce;

  switch (outcome.reason) {
    case 'nonce_mismatch': {
      const expected = ctx.input.expectedNonce;
      if (!expected) break;
      for (const text of [encodeBase64(expected), encodeBase64Url(expected)]) {
        if (await tryWith({ expectedNonce: utf8(text) })) {
          hints.push({
            code: 'nonce_base64_text',
            message:
              'the token nonce is the base64 text of the final nonce: the device must decode the base64 it receives and use the bytes',
          });
          break;
        }
      }
      if (await tryWith({ expectedNonce: sha256(expected) })) {
        hints.push({
          code: 'nonce_hashed_by_device',
          message:
            'the token nonce is SHA-256 of the final nonce: the device must put the final nonce itself in the token (only App Attest hashes it, as clientDataHash)',
        });
      }
      if (
        ctx.serverNonce &&
        ctx.deviceNonce &&
        (await tryWith({ expectedNonce: ctx.serverNonce }))
      ) {
        hints.push({
          code: 'device_nonce_not_used',
          message:
            'the token was made over the server nonce alone: the device did not append the device nonce that was passed to verify',
        });
      }
      if (
        ctx.serverNonce &&
        !ctx.deviceNonce &&
        tokenNonce.length > ctx.serverNonce.length &&
        bytesEqual(tokenNonce.subarray(0, ctx.serverNonce.length), ctx.serverNonce)
      ) {
        if (await tryWith({ expectedNonce: tokenNonce })) {
          hints.push({
            code: 'device_nonce_missing',
            message: `the token nonce is the server nonce followed by ${tokenNonce.length - ctx.serverNonce.length} more bytes: the device used a device nonce that was not passed to verify (deviceNonce / --device-nonce)`,
          });
        }
      }
      break;
    }

    default:
      break;
  }
  const run: HintRun = { outcome, ctx, envelope, tokenNonce, tryWith, hints };
  for (const kindHints of KIND_HINTS) await kindHints(run);
  return hints;
}

function failedAt(outcome: VerifyOutcome): number {
  return outcome.ok
    ? Number.POSITIVE_INFINITY
    : outcome.checks.findIndex((c) => c.status === 'fail');
}
