import { decodeBase64 } from '../base64.js';
import { isMap } from '../cbor.js';
import { Rejection } from '../reasons.js';
import type { AllowlistReader, AndroidPackagePolicy, GoogleTokenDetails, PlatformContext, PlatformDetails, PlatformVerifier } from '../types.js';
import { bytesEqual } from '../verify.js';
import { DEFAULT_MIN_VERDICT, isMinVerdict, meetsMinimumVerdict, strongestVerdict } from './deviceVerdict.js';
import { KeyCache } from './keyCache.js';
import { openIntegrityToken } from './openIntegrityToken.js';
import { parsePlayIntegrityPayload } from './playIntegrityPayload.js';
import { quote } from './quote.js';

/** Largest `integrityToken` accepted, in UTF-8 bytes (token-format.md section 4). */
export const INTEGRITY_TOKEN_MAX_BYTES = 16 * 1024;

/** Maximum token age when an allowlist entry does not set one. */
export const DEFAULT_MAX_AGE_SECONDS = 600;

/** How far in the future `timestampMillis` may be (device and Google clocks drift). */
export const MAX_FUTURE_SKEW_MS = 60_000;

/**
 * The stable check ids, in order. `gms.evidence` (the shape of the `gms` map) comes before the ten
 * checks of token-format.md section 4 so a malformed map is attributed to a check of its own.
 */
export const GOOGLE_CHECKS = [
  'gms.evidence',
  'gms.package',
  'gms.decrypt',
  'gms.signature',
  'gms.payload',
  'gms.nonce',
  'gms.packageMatch',
  'gms.recognition',
  'gms.certificate',
  'gms.integrity',
  'gms.freshness',
] as const;

/** What the Play Integrity verifier reads: the allowlist (packages, key pairs, policies). */
export interface GoogleVerifierDeps {
  allowlist: AllowlistReader;
  /** imported keys, kept across requests; a fresh bounded cache when omitted */
  keyCache?: KeyCache;
}

/**
 * Creates the Play Integrity verifier (classic request, verified locally with the app's own keys).
 * @param deps the Android allowlist, and optionally a key cache to share
 * @returns the `gms` platform verifier; its `verify` throws `Rejection` for a rejected token
 */
export function createGoogleVerifier(deps: GoogleVerifierDeps): PlatformVerifier {
  if (!deps?.allowlist || typeof deps.allowlist.androidPackage !== 'function') {
    throw new TypeError('createGoogleVerifier: deps.allowlist must be an AllowlistReader');
  }
  const { allowlist } = deps;
  const keyCache = deps.keyCache ?? new KeyCache();
  const importPair = keyCache.get.bind(keyCache);

  async function verify(evidence: unknown, ctx: PlatformContext): Promise<PlatformDetails> {
    const { trace } = ctx;
    trace.plan(GOOGLE_CHECKS);

    trace.current('gms.evidence');
    const { packageName, integrityToken } = readEvidence(evidence);
    trace.facts.packageName = packageName;
    trace.pass('gms.evidence', `package name and a ${Buffer.byteLength(integrityToken)}-byte integrity token`);

    // Check 1: the claimed package selects the allowlist entry, and so the keys
    trace.current('gms.package');
    const policy = await allowlist.androidPackage(packageName);
    if (!policy) throw new Rejection('gms_package_not_allowed', `package ${quote(packageName)} is not on the Android allowlist`);
    const { minVerdict, maxAgeSeconds } = policySettings(policy);
    trace.pass('gms.package', `package ${quote(packageName)} is allowlisted with ${policy.keys.length} key pair(s)`);

    // Checks 2 and 3: JWE A256KW/A256GCM, then JWS ES256, across the package's key pairs
    trace.current('gms.decrypt');
    const opened = await openIntegrityToken(integrityToken, policy.keys, importPair);
    if (opened.stage === 'sealed') throw new Rejection('gms_decrypt_failed', opened.problem);
    const decryptedBy = opened.stage === 'verified' ? [opened.pairId] : opened.pairIds;
    trace.pass('gms.decrypt', `decrypted (A256KW, A256GCM) with key pair ${decryptedBy.map(quote).join(', ')}`);
    trace.current('gms.signature');
    if (opened.stage === 'decrypted') throw new Rejection('gms_signature_invalid', opened.problem);
    trace.pass('gms.signature', `ES256 signature verified with key pair ${quote(opened.pairId)}`);

    // Check 4: the verdict layout
    trace.current('gms.payload');
    const parsed = parsePlayIntegrityPayload(opened.payload);
    if (!parsed.ok) throw new Rejection('gms_payload_malformed', parsed.problem);
    const { requestDetails, appIntegrity, deviceIntegrity } = parsed.payload;
    trace.pass('gms.payload', 'Play Integrity verdict layout');

    // Check 5: the nonce the device asked Google to bind is this request's final nonce
    trace.current('gms.nonce');
    const nonce = decodeBase64(requestDetails.nonce);
    if (nonce === null) throw new Rejection('gms_nonce_mismatch', 'requestDetails.nonce is not base64url');
    if (!bytesEqual(nonce, ctx.nonce)) {
      throw new Rejection('gms_nonce_mismatch', `requestDetails.nonce (${nonce.length} bytes) differs from the final nonce (${ctx.nonce.length} bytes)`);
    }
    trace.pass('gms.nonce', `requestDetails.nonce equals the final nonce (${nonce.length} bytes)`);

    // Check 6: the package Google measured is the one whose keys and policy were used; the
    // request package name alone is whatever the caller passed to the API
    trace.current('gms.packageMatch');
    if (requestDetails.requestPackageName !== packageName) {
      throw new Rejection('gms_package_mismatch', `requestDetails.requestPackageName ${quote(requestDetails.requestPackageName)} is not ${quote(packageName)}`);
    }
    if (appIntegrity.packageName !== undefined && appIntegrity.packageName !== packageName) {
      throw new Rejection('gms_package_mismatch', `appIntegrity.packageName ${quote(appIntegrity.packageName)} is not ${quote(packageName)}`);
    }
    trace.pass(
      'gms.packageMatch',
      appIntegrity.packageName === undefined
        ? 'requestDetails.requestPackageName matches (appIntegrity carries no package name)'
        : 'requestDetails.requestPackageName and appIntegrity.packageName match',
    );

    // Check 7: Play recognizes this build
    trace.current('gms.recognition');
    const recognition = appIntegrity.appRecognitionVerdict;
    if (recognition !== 'PLAY_RECOGNIZED' && !(recognition === 'UNRECOGNIZED_VERSION' && policy.allowUnrecognized)) {
      const hint = recognition === 'UNRECOGNIZED_VERSION' ? ' (the entry does not allow unrecognized versions)' : '';
      throw new Rejection('gms_app_not_recognized', `app recognition verdict is ${quote(recognition)}${hint}`);
    }
    trace.pass('gms.recognition', `app recognition verdict is ${recognition}`);

    // Check 8: signed by one of the allowlisted certificates
    trace.current('gms.certificate');
    if (policy.certificateDigests.length === 0) {
      trace.skip('gms.certificate', 'the allowlist entry lists no signing-certificate digests');
    } else {
      const listed = appIntegrity.certificateSha256Digest ?? [];
      const match = listed.some((text) => {
        const digest = decodeBase64(text);
        return digest !== null && policy.certificateDigests.some((allowed) => bytesEqual(digest, allowed));
      });
      if (!match) {
        throw new Rejection('gms_certificate_mismatch', `none of the ${listed.length} signing-certificate digest(s) in the token is allowlisted`);
      }
      trace.pass('gms.certificate', 'a signing-certificate digest is allowlisted');
    }

    // Check 9: device integrity at least the entry's minimum
    trace.current('gms.integrity');
    const verdicts = deviceIntegrity.deviceRecognitionVerdict ?? [];
    const strongest = strongestVerdict(verdicts);
    if (!meetsMinimumVerdict(verdicts, minVerdict)) {
      throw new Rejection('gms_integrity_insufficient', `device verdict ${strongest ?? 'none'} is below the minimum ${minVerdict}`);
    }
    trace.pass('gms.integrity', `device verdict ${strongest} meets the minimum ${minVerdict}`);

    // Check 10: issued recently, by the verification clock
    trace.current('gms.freshness');
    const issued = requestDetails.timestampMillis;
    trace.facts.issuedAt = new Date(issued).toISOString();
    const ageMs = ctx.now.getTime() - issued;
    if (ageMs > maxAgeSeconds * 1000) {
      throw new Rejection('gms_token_stale', `issued ${seconds(ageMs)} s ago, more than the ${maxAgeSeconds} s allowed`);
    }
    if (-ageMs > MAX_FUTURE_SKEW_MS) {
      throw new Rejection('gms_token_stale', `issued ${seconds(-ageMs)} s in the future, more than the ${MAX_FUTURE_SKEW_MS / 1000} s allowed`);
    }
    trace.pass('gms.freshness', ageMs >= 0 ? `issued ${seconds(ageMs)} s ago (at most ${maxAgeSeconds} s)` : `issued ${seconds(-ageMs)} s ahead of the clock (at most ${MAX_FUTURE_SKEW_MS / 1000} s)`);

    const googleTokenDetails: GoogleTokenDetails = { packageName, deviceIntegrityVerdicts: [...verdicts], timestampMillis: issued };
    return { service: 'gms', googleTokenDetails };
  }

  return { service: 'gms', verify };
}

/** The `gms` evidence map (token-format.md section 4); anything else is `token_malformed`. */
function readEvidence(evidence: unknown): { packageName: string; integrityToken: string } {
  if (!isMap(evidence)) throw new Rejection('token_malformed', 'the "gms" evidence is not a map');
  const packageName = evidence.get('packageName');
  if (typeof packageName !== 'string') throw new Rejection('token_malformed', '"gms.packageName" must be text');
  const integrityToken = evidence.get('integrityToken');
  if (typeof integrityToken !== 'string') throw new Rejection('token_malformed', '"gms.integrityToken" must be text');
  if (Buffer.byteLength(integrityToken, 'utf8') > INTEGRITY_TOKEN_MAX_BYTES) {
    throw new Rejection('token_malformed', `"gms.integrityToken" is longer than ${INTEGRITY_TOKEN_MAX_BYTES} bytes`);
  }
  return { packageName, integrityToken };
}

/**
 * The entry's minimum verdict and maximum age, with the documented defaults when unset. A value
 * that is set but unusable is a broken allowlist, a fault for the operator (HTTP 500), not a
 * verdict on the token.
 */
function policySettings(policy: AndroidPackagePolicy): { minVerdict: AndroidPackagePolicy['minVerdict']; maxAgeSeconds: number } {
  const minVerdict = policy.minVerdict ?? DEFAULT_MIN_VERDICT;
  const maxAgeSeconds = policy.maxAgeSeconds ?? DEFAULT_MAX_AGE_SECONDS;
  if (!isMinVerdict(minVerdict)) throw new Error(`allowlist entry ${quote(policy.packageName)} has an unknown minimum verdict`);
  if (!Number.isFinite(maxAgeSeconds) || maxAgeSeconds <= 0) {
    throw new Error(`allowlist entry ${quote(policy.packageName)} has an invalid maximum age`);
  }
  return { minVerdict, maxAgeSeconds };
}

function seconds(ms: number): string {
  return (ms / 1000).toFixed(3).replace(/\.?0+$/, '');
}
