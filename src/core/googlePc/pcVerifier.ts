/**
 * The `gms-pc` verifier: Play Integrity for PC (Google Play Games on PC). The device sends its
 * PC integrity token; Google decodes it through `v1/{packageName}:decodePcIntegrityToken` with the
 * package's service account, and the verdict is checked like a standard Play Integrity request:
 * requestHash binds the final nonce, requestTime is within the package's maximum age.
 */
import { createHash } from 'node:crypto';
import { checkAppScope } from '../appScope.js';
import { decodeBase64 } from '../base64.js';
import { isMap } from '../cbor.js';
import { DEFAULT_ANDROID_POLICY } from '../google/defaultAndroidPolicy.js';
import { checkFreshness } from '../google/freshness.js';
import { INTEGRITY_TOKEN_MAX_BYTES } from '../google/googleVerifier.js';
import { quote } from '../google/quote.js';
import { Rejection } from '../reasons.js';
import type {
  AllowlistReader,
  IntegrityTokenDecoder,
  PlatformContext,
  PlatformVerifier,
} from '../ports.js';
import type { GooglePcTokenDetails } from './googlePcTokenDetails.js';
import type { PlatformDetails } from '../kinds.js';
import { bytesEqual } from '../bytesEqual.js';
import { parsePcIntegrityPayload } from './pcPayload.js';

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
    const policy = await allowlist.androidPackage(packageName);
    if (!policy)
      throw new Rejection(
        'gms_package_not_allowed',
        `package ${quote(packageName)} is not on the Android allowlist`,
      );
    // the decode spends this package's quota: a key scoped to other apps stops here
    checkAppScope(ctx.appScope, packageName, 'package');
    const maxAgeSeconds = policy.maxAgeSeconds ?? DEFAULT_ANDROID_POLICY.maxAgeSeconds;
    if (!Number.isFinite(maxAgeSeconds) || maxAgeSeconds <= 0)
      throw new Error(`allowlist entry ${quote(packageName)} has an invalid maximum age`);
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
    if (!decoder) throw new Error('gms-pc tokens need the Google decoder, and none is configured');
    const decoded = await decoder.decode({
      packageName,
      integrityToken,
      serviceAccount: policy.serviceAccount,
      method: 'decodePcIntegrityToken',
    });
    if (!decoded.ok) throw new Rejection('gms_pc_decode_rejected', decoded.problem);
    trace.pass(
      'gmsPc.decode',
      `decoded by Google with service account ${quote(policy.serviceAccount.clientEmail)}`,
    );

    trace.current('gmsPc.payload');
    const parsed = parsePcIntegrityPayload(decoded.payload);
    if (!parsed.ok) throw new Rejection('gms_pc_payload_malformed', parsed.problem);
    const payload = parsed.payload;
    trace.pass('gmsPc.payload', 'Play Integrity for PC verdict layout');

    trace.current('gmsPc.requestHash');
    const { requestHash, requestPackageName, requestTimeMillis } = payload.requestDetails;
    if (requestHash === undefined)
      throw new Rejection('gms_pc_nonce_mismatch', 'requestDetails.requestHash is absent');
    const hash = decodeBase64(requestHash);
    const expected = new Uint8Array(createHash('sha256').update(ctx.nonce).digest());
    if (hash === null || !bytesEqual(hash, expected))
      throw new Rejection(
        'gms_pc_nonce_mismatch',
        `requestDetails.requestHash is not base64url(SHA-256(final nonce)) over the ${ctx.nonce.length}-byte final nonce`,
      );
    trace.pass(
      'gmsPc.requestHash',
      'requestDetails.requestHash equals base64url(SHA-256(final nonce))',
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

    trace.current('gmsPc.freshness');
    trace.facts.issuedAt = new Date(requestTimeMillis).toISOString();
    checkFreshness(
      requestTimeMillis,
      ctx.now,
      maxAgeSeconds,
      { check: 'gmsPc.freshness', reason: 'gms_pc_token_stale', verb: 'requested' },
      trace,
    );

    const googlePcTokenDetails: GooglePcTokenDetails = {
      packageName,
      deviceRecognitionVerdict: [...verdicts],
      requestTimeMillis,
      ...(payload.appLicensingVerdict !== undefined
        ? { appLicensingVerdict: payload.appLicensingVerdict }
        : {}),
      ...(payload.isTestingResponse !== undefined
        ? { isTestingResponse: payload.isTestingResponse }
        : {}),
    };
    return { service: 'gms-pc', googlePcTokenDetails };
  }

  return { service: 'gms-pc', verify };
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
