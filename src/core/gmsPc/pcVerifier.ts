/**
 * The `gms-pc` verifier: Play Integrity for PC (Google Play Games on PC). The device sends its
 * PC integrity token; Google decodes it through `v1/{packageName}:decodePcIntegrityToken` with the
 * package's service account, and the verdict is checked like a standard Play Integrity request:
 * requestHash binds the final nonce, requestTime is within the package's maximum age.
 */
import { checkAppScope } from '../appScope.js';
import { isMap } from '../cbor.js';
import { checkFreshness } from '../gms/freshness.js';
import { INTEGRITY_TOKEN_MAX_BYTES } from '../gms/googleVerifier.js';
import {
  allowlistedPackage,
  checkRequestHash,
  decodeByGoogle,
  maxAgeOf,
} from '../gms/playSteps.js';
import { quote } from '../gms/quote.js';
import { Rejection } from '../reasons.js';
import type {
  AllowlistReader,
  IntegrityTokenDecoder,
  PlatformContext,
  PlatformVerifier,
} from '../ports.js';
import type { GooglePcTokenDetails } from './googlePcTokenDetails.js';
import type { PlatformDetails } from '../kinds.js';
import { parsePcIntegrityPayload, type PcIntegrityPayload } from './pcPayload.js';

/** The only PC device label that passes (Google's PcDeviceIntegrity). */
export const MEETS_PC_INTEGRITY = 'MEETS_PC_INTEGRITY';
/** The longest package name read from the evidence map. */
const PACKAGE_MAX = 255;

/** The check ids of a `gms-pc` token, in order; freshness stays last. */
export const GOOGLE_PC_CHECKS = [
  'gmsPc.evidence',
  'gmsPc.package',
  'gmsPc.decode',
  'gmsPc.payload',
  'gmsPc.requestHash',
  'gmsPc.packageMatch',
  'gmsPc.integrity',
  'gmsPc.freshness',
] as const;

export interface GooglePcVerifierDeps {
  allowlist: AllowlistReader;
  /** Google's decodePcIntegrityToken; without it a `gms-pc` token is a fault */
  decoder?: IntegrityTokenDecoder;
}

export function createGooglePcVerifier(deps: GooglePcVerifierDeps): PlatformVerifier {
  if (!deps?.allowlist || typeof deps.allowlist.androidPackage !== 'function')
    throw new TypeError('createGooglePcVerifier: deps.allowlist must be an AllowlistReader');
  const { allowlist, decoder } = deps;

  async function verify(evidence: unknown, ctx: PlatformContext): Promise<PlatformDetails> {
    const { trace } = ctx;
    trace.plan(GOOGLE_PC_CHECKS);
    trace.current('gmsPc.evidence');
    const { packageName, integrityToken } = readPcEvidence(evidence);
    trace.facts.packageName = packageName;
    trace.pass(
      'gmsPc.evidence',
      `package name and a ${Buffer.byteLength(integrityToken)}-byte PC integrity token`,
    );

    trace.current('gmsPc.package');
    const policy = await allowlistedPackage(allowlist, packageName, trace);
    // the decode spends this package's quota: a key scoped to other apps stops here
    checkAppScope(ctx.appScope, packageName, 'package');
    const maxAgeSeconds = maxAgeOf(policy);
    if (!policy.serviceAccount)
      throw new Rejection(
        'gms_pc_not_configured',
        `package ${quote(packageName)} has no service account, so its PC tokens cannot be decoded`,
      );
    trace.pass(
      'gmsPc.package',
      `package ${quote(packageName)} is allowlisted with a service account`,
    );

    trace.current('gmsPc.decode');
    const decoded = await decodeByGoogle(
      decoder,
      {
        packageName,
        integrityToken,
        serviceAccount: policy.serviceAccount,
        method: 'decodePcIntegrityToken',
      },
      { check: 'gmsPc.decode', reason: 'gms_pc_decode_rejected', tokens: 'gms-pc' },
      trace,
    );

    trace.current('gmsPc.payload');
    const parsed = parsePcIntegrityPayload(decoded);
    if (!parsed.ok) throw new Rejection('gms_pc_payload_malformed', parsed.problem);
    const payload = parsed.payload;
    trace.pass('gmsPc.payload', 'Play Integrity for PC verdict layout');

    trace.current('gmsPc.requestHash');
    const { requestHash, requestPackageName, requestTimeMillis } = payload.requestDetails;
    checkRequestHash(
      requestHash,
      ctx.nonce,
      {
        check: 'gmsPc.requestHash',
        reason: 'gms_pc_nonce_mismatch',
        absent: 'requestDetails.requestHash is absent',
      },
      trace,
    );

    trace.current('gmsPc.packageMatch');
    if (requestPackageName !== packageName)
      throw new Rejection(
        'gms_pc_package_mismatch',
        `requestDetails.requestPackageName is ${quote(requestPackageName)}, not ${quote(packageName)}`,
      );
    trace.pass('gmsPc.packageMatch', `requestDetails.requestPackageName is ${quote(packageName)}`);

    trace.current('gmsPc.integrity');
    const verdicts = payload.deviceRecognitionVerdict;
    if (!verdicts.includes(MEETS_PC_INTEGRITY))
      throw new Rejection(
        'gms_pc_integrity_insufficient',
        `deviceRecognitionVerdict is [${verdicts.map(quote).join(', ')}], without ${MEETS_PC_INTEGRITY}`,
      );
    trace.pass('gmsPc.integrity', `deviceRecognitionVerdict holds ${MEETS_PC_INTEGRITY}`);

    checkFreshness(requestTimeMillis, maxAgeSeconds, ctx, {
      check: 'gmsPc.freshness',
      reason: 'gms_pc_token_stale',
      verb: 'requested',
    });

    return { service: 'gms-pc', googlePcTokenDetails: detailsOf(packageName, payload) };
  }

  return { service: 'gms-pc', verify };
}

/** What the RP learns of an accepted PC token: the verdict, and the optional fields Google sent. */
function detailsOf(packageName: string, payload: PcIntegrityPayload): GooglePcTokenDetails {
  const { appLicensingVerdict, isTestingResponse } = payload;
  return {
    packageName,
    deviceRecognitionVerdict: [...payload.deviceRecognitionVerdict],
    requestTimeMillis: payload.requestDetails.requestTimeMillis,
    ...(appLicensingVerdict !== undefined ? { appLicensingVerdict } : {}),
    ...(isTestingResponse !== undefined ? { isTestingResponse } : {}),
  };
}

/** The `gms-pc` evidence map: `{ packageName, integrityToken }`; anything else is `token_malformed`. */
export function readPcEvidence(evidence: unknown): { packageName: string; integrityToken: string } {
  if (!isMap(evidence))
    throw new Rejection('token_malformed', 'the "gms-pc" evidence is not a map');
  if (evidence.size > 8)
    throw new Rejection('token_malformed', 'the "gms-pc" evidence has more than 8 keys');
  const packageName = evidence.get('packageName');
  if (
    typeof packageName !== 'string' ||
    packageName.length === 0 ||
    packageName.length > PACKAGE_MAX
  )
    throw new Rejection(
      'token_malformed',
      `"gms-pc.packageName" must be text of 1 to ${PACKAGE_MAX} characters`,
    );
  const integrityToken = evidence.get('integrityToken');
  if (typeof integrityToken !== 'string' || integrityToken.length === 0)
    throw new Rejection('token_malformed', '"gms-pc.integrityToken" must be text');
  if (Buffer.byteLength(integrityToken, 'utf8') > INTEGRITY_TOKEN_MAX_BYTES)
    throw new Rejection(
      'token_malformed',
      `"gms-pc.integrityToken" is longer than ${INTEGRITY_TOKEN_MAX_BYTES} bytes`,
    );
  return { packageName, integrityToken };
}
