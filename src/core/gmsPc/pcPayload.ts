/**
 * The decoded Play Integrity for PC verdict: `DecodePcIntegrityTokenResponse.tokenPayloadExternal`
 * (schema `PcTokenPayloadExternal`) of Google's Play Integrity API v1 discovery document
 * (https://playintegrity.googleapis.com/$discovery/rest?version=v1; excerpt with provenance in
 * test/fixtures/google-pc/README.md):
 *
 *   PcTokenPayloadExternal { requestDetails: PcRequestDetails (required),
 *     deviceIntegrity: PcDeviceIntegrity (required), accountDetails?: PcAccountDetails,
 *     testingDetails?: PcTestingDetails }
 *   PcRequestDetails { requestPackageName: string (required), requestHash?: string,
 *     requestTime: string, format google-datetime (required) }
 *   PcDeviceIntegrity { deviceRecognitionVerdict?: string[] (e.g. MEETS_PC_INTEGRITY) }
 *   PcAccountDetails { appLicensingVerdict: string (required) }
 *   PcTestingDetails { isTestingResponse: boolean (required) }
 *
 * Every field is bounded before it is read (length, count, nesting); values Google may add later
 * (a new verdict label, a new licensing value, a new field) are carried through as data.
 */

/** The most verdict labels read from `deviceRecognitionVerdict` (Google sends one or two). */
export const PC_MAX_VERDICTS = 16;
/** The longest verdict or licensing label read (Google's are under 40 characters). */
export const PC_MAX_LABEL = 64;
/** The longest package name (Android's limit is 255). */
export const PC_MAX_PACKAGE = 255;
/** The longest request hash (base64url of a SHA-256 digest is 43; Google allows up to 500). */
export const PC_MAX_REQUEST_HASH = 500;
/** The longest RFC 3339 timestamp (nanoseconds and an offset fit in 40). */
export const PC_MAX_TIME = 40;
/** The most top-level fields read; more is not a verdict Google sends. */
export const PC_MAX_FIELDS = 32;

export interface PcIntegrityPayload {
  requestDetails: { requestPackageName: string; requestHash?: string; requestTimeMillis: number };
  /** the labels as Google sent them, unknown ones included */
  deviceRecognitionVerdict: string[];
  appLicensingVerdict?: string;
  isTestingResponse?: boolean;
}

type Parsed = { ok: true; payload: PcIntegrityPayload } | { ok: false; problem: string };

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})$/;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function label(v: unknown, max: number): v is string {
  return typeof v === 'string' && v.length > 0 && v.length <= max;
}

/**
 * Reads a `PcTokenPayloadExternal` as Google's decode answered it (already JSON). Never throws:
 * a layout it cannot read is `{ ok: false }` with a problem naming the field.
 */
export function parsePcIntegrityPayload(raw: unknown): Parsed {
  const bad = (problem: string): Parsed => ({ ok: false, problem });
  if (!isRecord(raw)) return bad('tokenPayloadExternal is not an object');
  if (Object.keys(raw).length > PC_MAX_FIELDS)
    return bad(`tokenPayloadExternal has more than ${PC_MAX_FIELDS} fields`);

  const rd = raw.requestDetails;
  if (!isRecord(rd)) return bad('requestDetails is absent or not an object');
  if (!label(rd.requestPackageName, PC_MAX_PACKAGE))
    return bad(
      `requestDetails.requestPackageName must be text of 1 to ${PC_MAX_PACKAGE} characters`,
    );
  if (rd.requestHash !== undefined && !label(rd.requestHash, PC_MAX_REQUEST_HASH))
    return bad(`requestDetails.requestHash must be text of 1 to ${PC_MAX_REQUEST_HASH} characters`);
  if (!label(rd.requestTime, PC_MAX_TIME) || !RFC3339.test(rd.requestTime))
    return bad('requestDetails.requestTime must be an RFC 3339 timestamp');
  const requestTimeMillis = Date.parse(rd.requestTime);
  if (!Number.isFinite(requestTimeMillis))
    return bad('requestDetails.requestTime is not a valid date');

  const di = raw.deviceIntegrity;
  if (!isRecord(di)) return bad('deviceIntegrity is absent or not an object');
  const verdicts = di.deviceRecognitionVerdict ?? [];
  if (!Array.isArray(verdicts))
    return bad('deviceIntegrity.deviceRecognitionVerdict is not a list');
  if (verdicts.length > PC_MAX_VERDICTS)
    return bad(`deviceIntegrity.deviceRecognitionVerdict has more than ${PC_MAX_VERDICTS} labels`);
  if (!verdicts.every((v) => label(v, PC_MAX_LABEL)))
    return bad(
      `deviceIntegrity.deviceRecognitionVerdict holds a label that is not text of 1 to ${PC_MAX_LABEL} characters`,
    );

  const payload: PcIntegrityPayload = {
    requestDetails: {
      requestPackageName: rd.requestPackageName,
      ...(rd.requestHash !== undefined ? { requestHash: rd.requestHash as string } : {}),
      requestTimeMillis,
    },
    deviceRecognitionVerdict: [...(verdicts as string[])],
  };

  if (raw.accountDetails !== undefined) {
    const ad = raw.accountDetails;
    if (!isRecord(ad)) return bad('accountDetails is not an object');
    if (ad.appLicensingVerdict !== undefined) {
      if (!label(ad.appLicensingVerdict, PC_MAX_LABEL))
        return bad(
          `accountDetails.appLicensingVerdict must be text of 1 to ${PC_MAX_LABEL} characters`,
        );
      payload.appLicensingVerdict = ad.appLicensingVerdict;
    }
  }
  if (raw.testingDetails !== undefined) {
    const td = raw.testingDetails;
    if (!isRecord(td)) return bad('testingDetails is not an object');
    if (td.isTestingResponse !== undefined) {
      if (typeof td.isTestingResponse !== 'boolean')
        return bad('testingDetails.isTestingResponse must be true or false');
      payload.isTestingResponse = td.isTestingResponse;
    }
  }
  return { ok: true, payload };
}
