/**
 * What a Play device recall write needs before Google is called: the attestation token the RP
 * verified must be a Play Integrity token (format 1, `device.service` gms) of an allowlisted
 * package that has a Google service account. A classic token must also open with the package's
 * own key pairs and name that package, as verify checks it (decryption, signature, layout, package),
 * so an RP can only mark devices of tokens Google issued for its packages. The nonce and the age
 * are not checked: the RP verified the token once already (its session is spent), and Google
 * accepts writes for up to 14 days after the token was issued. A standard token is opaque here:
 * Google's write authenticates it against the package itself.
 */
import { Rejection, type RejectReason } from '../reasons.js';
import type { AllowlistReader, AndroidKeyPair, GoogleServiceAccount } from '../ports.js';
import type { RecallBit } from './gmsTokenDetails.js';
import { parseEnvelope } from '../envelope.js';
import { readEvidence } from './googleVerifier.js';
import type { ImportedKeyPair } from './keyCache.js';
import { openIntegrityToken } from './openIntegrityToken.js';
import { parsePlayIntegrityPayload } from './playIntegrityPayload.js';
import { quote } from './quote.js';

/** The new values of a write, as Google's `WriteDeviceRecallRequest.newValues` names them. */
export interface RecallValues {
  bitFirst?: boolean;
  bitSecond?: boolean;
  bitThird?: boolean;
}

export type RecallTarget =
  | {
      ok: true;
      packageName: string;
      /** the compact token from the device, sent to Google as `integrityToken` */
      integrityToken: string;
      request: 'classic' | 'standard';
      serviceAccount: GoogleServiceAccount;
    }
  | { ok: false; reason: RejectReason; detail: string };

/**
 * Finds the package and integrity token a recall write is for.
 * @param token the format-1 token's CBOR bytes (the `attestationToken` the RP verified)
 * @param allowlist the allowlist as the API key's mode sees it (live keys: no test-only pairs)
 * @param importPair imports a pair's keys (the verifiers' key cache)
 */
export async function findRecallTarget(
  token: Uint8Array,
  allowlist: AllowlistReader,
  importPair: (pair: AndroidKeyPair) => Promise<ImportedKeyPair>,
): Promise<RecallTarget> {
  try {
    const envelope = parseEnvelope(token);
    if (envelope.service !== 'gms')
      throw new Rejection(
        'service_unsupported',
        `device.service is ${quote(envelope.service.slice(0, 32))}: device recall is for Play Integrity (gms) tokens`,
      );
    const { packageName, integrityToken, standard } = readEvidence(envelope.evidence);
    const policy = await allowlist.androidPackage(packageName);
    if (!policy)
      throw new Rejection(
        'gms_package_not_allowed',
        `package ${quote(packageName)} is not on the Android allowlist`,
      );
    if (!policy.serviceAccount)
      throw new Rejection(
        'gms_standard_not_configured',
        `package ${quote(packageName)} has no service account, which Google's device recall write needs`,
      );
    if (!standard) await checkClassic(integrityToken, packageName, policy.keys, importPair);
    return {
      ok: true,
      packageName,
      integrityToken,
      request: standard ? 'standard' : 'classic',
      serviceAccount: policy.serviceAccount,
    };
  } catch (err) {
    if (!(err instanceof Rejection)) throw err;
    return { ok: false, reason: err.reason, detail: err.detail };
  }
}

/** Checks 2 to 4 and 6 of a classic token: it opens with the package's pairs and names the package. */
async function checkClassic(
  integrityToken: string,
  packageName: string,
  pairs: readonly AndroidKeyPair[],
  importPair: (pair: AndroidKeyPair) => Promise<ImportedKeyPair>,
): Promise<void> {
  const opened = await openIntegrityToken(integrityToken, pairs, importPair);
  if (opened.stage === 'sealed') throw new Rejection('gms_decrypt_failed', opened.problem);
  if (opened.stage === 'decrypted') throw new Rejection('gms_signature_invalid', opened.problem);
  const parsed = parsePlayIntegrityPayload(opened.payload);
  if (!parsed.ok) throw new Rejection('gms_payload_malformed', parsed.problem);
  const { requestDetails, appIntegrity } = parsed.payload;
  if (
    requestDetails.requestPackageName !== packageName ||
    (appIntegrity.packageName !== undefined && appIntegrity.packageName !== packageName)
  )
    throw new Rejection(
      'gms_package_mismatch',
      `the verdict names ${quote(requestDetails.requestPackageName)}, not ${quote(packageName)}`,
    );
}

/** The bits a write sets, for logs: `first=true,third=false`. */
export function describeRecallValues(values: RecallValues): string {
  const names: Record<keyof RecallValues, RecallBit> = {
    bitFirst: 'first',
    bitSecond: 'second',
    bitThird: 'third',
  };
  return (Object.keys(names) as (keyof RecallValues)[])
    .filter((k) => values[k] !== undefined)
    .map((k) => `${names[k]}=${String(values[k])}`)
    .join(',');
}
