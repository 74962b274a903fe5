/**
 * The steps every Play kind runs (`gms`, and those that decode with another Google method): the package selects the allowlist entry,
 * Google decodes the token under the package's service account, and the request hash binds the
 * final nonce; freshness is checkFreshness (freshness.ts). Each kind names its own checks and
 * reasons; the steps are written once.
 */
import { createHash } from 'node:crypto';
import { decodeBase64 } from '../base64.js';
import { bytesEqual } from '../bytesEqual.js';
import type { CheckId } from '../checkTitles.js';
import type { Trace } from '../outcome.js';
import type {
  AllowlistReader,
  AndroidPackagePolicy,
  GoogleServiceAccount,
  IntegrityTokenDecoder,
  PlayDecodeMethod,
} from '../ports.js';
import { Rejection, type RejectReason } from '../reasons.js';
import { DEFAULT_ANDROID_POLICY } from './defaultAndroidPolicy.js';
import { quote } from './quote.js';

/**
 * The package's allowlist entry (`gms_package_not_allowed` without one); the entry's observe
 * set applies from here on.
 */
export async function allowlistedPackage(
  allowlist: AllowlistReader,
  packageName: string,
  trace: Trace,
): Promise<AndroidPackagePolicy> {
  const policy = await allowlist.androidPackage(packageName);
  if (!policy)
    throw new Rejection(
      'gms_package_not_allowed',
      `package ${quote(packageName)} is not on the Android allowlist`,
    );
  trace.observe(policy.observe ?? []);
  return policy;
}

/**
 * The entry's maximum token age, the documented default when unset. A value that is set but
 * unusable is a broken allowlist, a fault for the operator (HTTP 500), not a verdict on the token.
 */
export function maxAgeOf(policy: AndroidPackagePolicy): number {
  const maxAgeSeconds = policy.maxAgeSeconds ?? DEFAULT_ANDROID_POLICY.maxAgeSeconds;
  if (!Number.isFinite(maxAgeSeconds) || maxAgeSeconds <= 0)
    throw new Error(`allowlist entry ${quote(policy.packageName)} has an invalid maximum age`);
  return maxAgeSeconds;
}

/**
 * Google decodes the token under the package's service account: its payload, or `what.reason`
 * when Google refuses the token. No decoder is a fault (the deployment is missing it).
 */
export async function decodeByGoogle(
  decoder: IntegrityTokenDecoder | undefined,
  request: {
    packageName: string;
    integrityToken: string;
    serviceAccount: GoogleServiceAccount;
    method?: PlayDecodeMethod;
  },
  what: { check: CheckId; reason: RejectReason; tokens: string },
  trace: Trace,
): Promise<unknown> {
  if (!decoder)
    throw new Error(`${what.tokens} tokens need the Google decoder, and none is configured`);
  const decoded = await decoder.decode(request);
  if (!decoded.ok) throw new Rejection(what.reason, decoded.problem);
  trace.pass(
    what.check,
    `decoded by Google with service account ${quote(request.serviceAccount.clientEmail)}`,
  );
  return decoded.payload;
}

/**
 * `requestDetails.requestHash` is base64url(SHA-256(final nonce)): what the device passed to
 * Google's token provider, so the verdict is bound to this request.
 */
export function checkRequestHash(
  requestHash: string | undefined,
  nonce: Uint8Array,
  what: { check: CheckId; reason: RejectReason; absent: string },
  trace: Trace,
): void {
  if (requestHash === undefined) throw new Rejection(what.reason, what.absent);
  const hash = decodeBase64(requestHash);
  const expected = new Uint8Array(createHash('sha256').update(nonce).digest());
  if (hash === null || !bytesEqual(hash, expected))
    throw new Rejection(
      what.reason,
      `requestDetails.requestHash is not base64url(SHA-256(final nonce)) over the ${nonce.length}-byte final nonce`,
    );
  trace.pass(what.check, 'requestDetails.requestHash equals base64url(SHA-256(final nonce))');
}
