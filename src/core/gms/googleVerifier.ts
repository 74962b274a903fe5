import { decodeBase64, encodeBase64Url } from '../base64.js';
import { isMap } from '../cbor.js';
import { checkAppScope } from '../appScope.js';
import { Rejection } from '../reasons.js';
import type {
  AllowlistReader,
  AndroidPackagePolicy,
  IntegrityTokenDecoder,
  PlatformContext,
  PlatformVerifier,
} from '../ports.js';
import type { GoogleTokenDetails } from './gmsTokenDetails.js';
import type { PlatformDetails } from '../kinds.js';
import { bytesEqual } from '../bytesEqual.js';
import { DEFAULT_ANDROID_POLICY } from './defaultAndroidPolicy.js';
import { isMinVerdict, meetsMinimumVerdict, strongestVerdict } from './deviceVerdict.js';
import { KeyCache } from './keyCache.js';
import { openIntegrityToken } from './openIntegrityToken.js';
import {
  parsePlayIntegrityJson,
  parsePlayIntegrityPayload,
  type PlayIntegrityPayload,
} from './playIntegrityPayload.js';
import { extensions } from './gmsExtensions.js';
import { quote } from './quote.js';
import { playRuleFailed, remediationFor } from './remediation.js';
import { checkNewerVerdicts } from './verdictPolicy.js';
import { VERDICT_CHECKS } from './verdictResult.js';
import { checkFreshness } from './freshness.js';
import { allowlistedPackage, checkRequestHash, decodeByGoogle, maxAgeOf } from './playSteps.js';

/** Largest `integrityToken` accepted, in UTF-8 bytes (docs/token-format.md section 4). */
export const INTEGRITY_TOKEN_MAX_BYTES = 16 * 1024;

/** How far in the future `timestampMillis` may be (device and Google clocks drift). */

/** The checks both kinds of request run on the decoded verdict, in order; freshness stays last. */
const DECODED_VERDICT_CHECKS = [
  'gms.packageMatch',
  'gms.recognition',
  'gms.certificate',
  'gms.integrity',
  ...VERDICT_CHECKS,
  'gms.freshness',
] as const;

/**
 * The stable check ids of a classic request, in order. `gms.evidence` (the shape of the `gms` map)
 * comes before the ten checks of docs/token-format.md section 4 so a malformed map is attributed to a
 * check of its own; the newer verdicts run before freshness, which stays last.
 */
export const GOOGLE_CHECKS = [
  'gms.evidence',
  'gms.package',
  'gms.decrypt',
  'gms.signature',
  'gms.payload',
  'gms.nonce',
  ...DECODED_VERDICT_CHECKS,
] as const;

/**
 * The check ids of a standard request: Google decodes the token (no local keys), and the request
 * hash binds the final nonce; every later check is the classic one.
 */
export const GOOGLE_STANDARD_CHECKS = [
  'gms.evidence',
  'gms.package',
  'gms.decode',
  'gms.payload',
  'gms.requestHash',
  ...DECODED_VERDICT_CHECKS,
] as const;

/** What the Play Integrity verifier reads: the allowlist (packages, key pairs, policies). */
export interface GoogleVerifierDeps {
  allowlist: AllowlistReader;
  /** imported keys, kept across requests; a fresh bounded cache when omitted */
  keyCache?: KeyCache;
  /** Google's decodeIntegrityToken, for standard requests; without it they are a fault */
  decoder?: IntegrityTokenDecoder;
}

/**
 * Creates the Play Integrity verifier: classic requests verified locally with the app's own keys,
 * standard requests decoded by Google through `deps.decoder`.
 * @param deps the Android allowlist, and optionally a key cache to share and the decoder
 * @returns the `gms` platform verifier; its `verify` throws `Rejection` for a rejected token
 */
export function createGoogleVerifier(deps: GoogleVerifierDeps): PlatformVerifier {
  if (!deps?.allowlist || typeof deps.allowlist.androidPackage !== 'function') {
    throw new TypeError('createGoogleVerifier: deps.allowlist must be an AllowlistReader');
  }
  const { allowlist, decoder } = deps;
  const keyCache = deps.keyCache ?? new KeyCache();
  const importPair = keyCache.get.bind(keyCache);

  async function verify(evidence: unknown, ctx: PlatformContext): Promise<PlatformDetails> {
    const { trace } = ctx;
    trace.current('gms.evidence');
    let read: Evidence;
    try {
      read = readEvidence(evidence);
    } catch (err) {
      trace.plan(GOOGLE_CHECKS);
      throw err;
    }
    const { packageName, integrityToken, standard } = read;
    trace.plan(standard ? GOOGLE_STANDARD_CHECKS : GOOGLE_CHECKS);
    trace.facts.packageName = packageName;
    if (standard) trace.facts.request = 'standard';
    trace.pass(
      'gms.evidence',
      `package name and a ${Buffer.byteLength(integrityToken)}-byte ${standard ? 'standard' : 'classic'}-request integrity token`,
    );

    // Check 1: the claimed package selects the allowlist entry, and so the keys
    trace.current('gms.package');
    const policy = await allowlistedPackage(allowlist, packageName, trace);
    const { minVerdict, maxAgeSeconds } = policySettings(policy);
    // a standard token's package is only claimed until Google decodes it, but the decode spends
    // that package's quota under its service account: a key scoped to other apps stops here
    // (check 6 holds Google's answer to this same package, so nothing it would accept is refused)
    if (standard) checkAppScope(ctx.appScope, packageName, 'package');
    trace.pass(
      'gms.package',
      standard
        ? `package ${quote(packageName)} is allowlisted${policy.serviceAccount ? ' with a service account' : ''}`
        : `package ${quote(packageName)} is allowlisted with ${policy.keys.length} key pair(s)`,
    );

    const payload = standard
      ? await decodeStandard(packageName, integrityToken, policy, ctx)
      : await openClassic(integrityToken, policy, ctx);
    const { requestDetails, appIntegrity, deviceIntegrity } = payload;

    // Check 6: the package Google measured is the one whose keys and policy were used; the
    // request package name alone is whatever the caller passed to the API
    trace.current('gms.packageMatch');
    if (requestDetails.requestPackageName !== packageName) {
      throw new Rejection(
        'gms_package_mismatch',
        `requestDetails.requestPackageName ${quote(requestDetails.requestPackageName)} is not ${quote(packageName)}`,
      );
    }
    if (appIntegrity.packageName !== undefined && appIntegrity.packageName !== packageName) {
      throw new Rejection(
        'gms_package_mismatch',
        `appIntegrity.packageName ${quote(appIntegrity.packageName)} is not ${quote(packageName)}`,
      );
    }
    // the package is now the one Google signed (or decoded) the verdict for: the key's scope
    // applies to it, before any verdict rule
    checkAppScope(ctx.appScope, packageName, 'package');
    trace.pass(
      'gms.packageMatch',
      appIntegrity.packageName === undefined
        ? 'requestDetails.requestPackageName matches (appIntegrity carries no package name)'
        : 'requestDetails.requestPackageName and appIntegrity.packageName match',
    );

    // Check 7: Play recognizes this build
    trace.current('gms.recognition');
    const recognition = appIntegrity.appRecognitionVerdict;
    if (
      recognition !== 'PLAY_RECOGNIZED' &&
      !(recognition === 'UNRECOGNIZED_VERSION' && policy.allowUnrecognized)
    ) {
      const hint =
        recognition === 'UNRECOGNIZED_VERSION'
          ? ' (the entry does not allow unrecognized versions)'
          : '';
      playRuleFailed(
        trace,
        'gms.recognition',
        'gms_app_not_recognized',
        `app recognition verdict is ${quote(recognition)}${hint}`,
        remediationFor('gms_app_not_recognized', payload, policy),
      );
    } else trace.pass('gms.recognition', `app recognition verdict is ${recognition}`);

    // Check 8: signed by one of the allowlisted certificates
    trace.current('gms.certificate');
    if (policy.certificateDigests.length === 0) {
      trace.skip('gms.certificate', 'the allowlist entry lists no signing-certificate digests');
    } else {
      const listed = appIntegrity.certificateSha256Digest ?? [];
      // Google writes the digests as unpadded base64url: the same text is the same bytes, and
      // spares the strict decode below, which any other spelling still goes through
      const allowedText = policy.certificateDigests.map(encodeBase64Url);
      const match = listed.some((text) => {
        if (text.length > 0 && allowedText.includes(text)) return true;
        const digest = decodeBase64(text);
        return (
          digest !== null &&
          policy.certificateDigests.some((allowed) => bytesEqual(digest, allowed))
        );
      });
      if (!match) {
        throw new Rejection(
          'gms_certificate_mismatch',
          `none of the ${listed.length} signing-certificate digest(s) in the token is allowlisted`,
        );
      }
      trace.pass('gms.certificate', 'a signing-certificate digest is allowlisted');
    }

    // Check 9: device integrity at least the entry's minimum
    trace.current('gms.integrity');
    const verdicts = deviceIntegrity.deviceRecognitionVerdict ?? [];
    const strongest = strongestVerdict(verdicts);
    if (!meetsMinimumVerdict(verdicts, minVerdict)) {
      playRuleFailed(
        trace,
        'gms.integrity',
        'gms_integrity_insufficient',
        `device verdict ${strongest ?? 'none'} is below the minimum ${minVerdict}`,
        remediationFor('gms_integrity_insufficient', payload, policy),
      );
    } else
      trace.pass('gms.integrity', `device verdict ${strongest} meets the minimum ${minVerdict}`);

    // The newer verdicts, each only when the package policy asks for it
    for (const result of checkNewerVerdicts(payload, policy)) {
      trace.current(result.check);
      if (!result.ok) {
        if (result.missing) trace.facts.missingVerdict = result.missing;
        const remedy = remediationFor(result.reason, payload, policy);
        playRuleFailed(trace, result.check, result.reason, result.detail, remedy);
      } else if (result.required) trace.pass(result.check, result.detail);
      else trace.skip(result.check, result.detail);
    }

    // Check 10: issued recently, by the verification clock
    const issued = requestDetails.timestampMillis;
    checkFreshness(issued, maxAgeSeconds, ctx, {
      check: 'gms.freshness',
      reason: 'gms_token_stale',
      verb: 'issued',
    });

    const googleTokenDetails: GoogleTokenDetails = {
      packageName,
      deviceIntegrityVerdicts: [...verdicts],
      timestampMillis: issued,
      ...extensions(payload),
    };
    return { service: 'gms', googleTokenDetails };
  }

  /** Checks 2 to 5 of a classic request: JWE, JWS, layout, then the nonce. */
  async function openClassic(
    integrityToken: string,
    policy: AndroidPackagePolicy,
    ctx: PlatformContext,
  ): Promise<PlayIntegrityPayload> {
    const { trace } = ctx;
    // Checks 2 and 3: JWE A256KW/A256GCM, then JWS ES256, across the package's key pairs
    trace.current('gms.decrypt');
    const opened = await openIntegrityToken(integrityToken, policy.keys, importPair);
    if (opened.stage === 'sealed') throw new Rejection('gms_decrypt_failed', opened.problem);
    const decryptedBy = opened.stage === 'verified' ? [opened.pairId] : opened.pairIds;
    trace.pass(
      'gms.decrypt',
      `decrypted (A256KW, A256GCM) with key pair ${decryptedBy.map(quote).join(', ')}`,
    );
    trace.current('gms.signature');
    if (opened.stage === 'decrypted') throw new Rejection('gms_signature_invalid', opened.problem);
    trace.pass('gms.signature', `ES256 signature verified with key pair ${quote(opened.pairId)}`);

    // Check 4: the verdict layout
    trace.current('gms.payload');
    const parsed = parsePlayIntegrityPayload(opened.payload);
    if (!parsed.ok) throw new Rejection('gms_payload_malformed', parsed.problem);
    const { requestDetails } = parsed.payload;
    trace.pass('gms.payload', 'Play Integrity verdict layout');

    // Check 5: the nonce the device asked Google to bind is this request's final nonce
    trace.current('gms.nonce');
    if (requestDetails.nonce === undefined)
      throw new Rejection(
        'gms_nonce_mismatch',
        'requestDetails.nonce is absent (a standard-request verdict sent as classic?)',
      );
    // the device's own unpadded base64url of the final nonce is that nonce without a decode
    const nonce =
      ctx.nonce.length > 0 && requestDetails.nonce === encodeBase64Url(ctx.nonce)
        ? ctx.nonce
        : decodeBase64(requestDetails.nonce);
    if (nonce === null)
      throw new Rejection('gms_nonce_mismatch', 'requestDetails.nonce is not base64url');
    if (!bytesEqual(nonce, ctx.nonce)) {
      throw new Rejection(
        'gms_nonce_mismatch',
        `requestDetails.nonce (${nonce.length} bytes) differs from the final nonce (${ctx.nonce.length} bytes)`,
      );
    }
    trace.pass('gms.nonce', `requestDetails.nonce equals the final nonce (${nonce.length} bytes)`);

    return parsed.payload;
  }

  /** A standard request: Google decodes the token, then the request hash binds the final nonce. */
  async function decodeStandard(
    packageName: string,
    integrityToken: string,
    policy: AndroidPackagePolicy,
    ctx: PlatformContext,
  ): Promise<PlayIntegrityPayload> {
    const { trace } = ctx;
    trace.current('gms.decode');
    if (!policy.serviceAccount) {
      throw new Rejection(
        'gms_standard_not_configured',
        `package ${quote(packageName)} has no service account, so its standard-request tokens cannot be decoded`,
      );
    }
    const decoded = await decodeByGoogle(
      decoder,
      { packageName, integrityToken, serviceAccount: policy.serviceAccount },
      { check: 'gms.decode', reason: 'gms_decode_rejected', tokens: 'standard-request' },
      trace,
    );

    trace.current('gms.payload');
    const parsed = parsePlayIntegrityJson(decoded);
    if (!parsed.ok) throw new Rejection('gms_payload_malformed', parsed.problem);
    trace.pass('gms.payload', 'Play Integrity verdict layout');

    // the device passed requestHash = base64url(SHA-256(final nonce)) to the token provider
    trace.current('gms.requestHash');
    checkRequestHash(
      parsed.payload.requestDetails.requestHash,
      ctx.nonce,
      {
        check: 'gms.requestHash',
        reason: 'gms_nonce_mismatch',
        absent:
          'requestDetails.requestHash is absent (a classic-request verdict sent as standard?)',
      },
      trace,
    );
    return parsed.payload;
  }

  return { service: 'gms', verify };
}

export interface Evidence {
  packageName: string;
  integrityToken: string;
  /** `gms.request` is "standard" (absent or "classic": a classic request) */
  standard: boolean;
}

/** The `gms` evidence map (docs/token-format.md section 4); anything else is `token_malformed`. */
export function readEvidence(evidence: unknown): Evidence {
  if (!isMap(evidence)) throw new Rejection('token_malformed', 'the "gms" evidence is not a map');
  const packageName = evidence.get('packageName');
  if (typeof packageName !== 'string')
    throw new Rejection('token_malformed', '"gms.packageName" must be text');
  const integrityToken = evidence.get('integrityToken');
  if (typeof integrityToken !== 'string')
    throw new Rejection('token_malformed', '"gms.integrityToken" must be text');
  if (Buffer.byteLength(integrityToken, 'utf8') > INTEGRITY_TOKEN_MAX_BYTES) {
    throw new Rejection(
      'token_malformed',
      `"gms.integrityToken" is longer than ${INTEGRITY_TOKEN_MAX_BYTES} bytes`,
    );
  }
  const request = evidence.get('request');
  if (request !== undefined && request !== 'classic' && request !== 'standard') {
    throw new Rejection(
      'token_malformed',
      '"gms.request" must be "classic" or "standard" when present',
    );
  }
  return { packageName, integrityToken, standard: request === 'standard' };
}

/**
 * The entry's minimum verdict and maximum age, with the documented defaults when unset. A value
 * that is set but unusable is a broken allowlist, a fault for the operator (HTTP 500), not a
 * verdict on the token.
 */
function policySettings(policy: AndroidPackagePolicy): {
  minVerdict: AndroidPackagePolicy['minVerdict'];
  maxAgeSeconds: number;
} {
  const minVerdict = policy.minVerdict ?? DEFAULT_ANDROID_POLICY.minVerdict;
  if (!isMinVerdict(minVerdict))
    throw new Error(`allowlist entry ${quote(policy.packageName)} has an unknown minimum verdict`);
  return { minVerdict, maxAgeSeconds: maxAgeOf(policy) };
}
