/**
 * A Play Integrity for PC verdict as Google's decodePcIntegrityToken answers it
 * (`PcTokenPayloadExternal`), for `dev mint gms-pc` and tests: requestHash is
 * base64url(SHA-256(final nonce)) as the device passes it, requestTime an RFC 3339 timestamp.
 */
import { createHash } from 'node:crypto';

export interface PcMintOptions {
  packageName: string;
  nonce: Uint8Array;
  requestTime: Date;
  /** default ['MEETS_PC_INTEGRITY'] */
  verdicts?: string[];
  /** accountDetails.appLicensingVerdict; null leaves accountDetails out (default LICENSED) */
  appLicensingVerdict?: string | null;
  /** testingDetails.isTestingResponse; absent leaves testingDetails out */
  isTestingResponse?: boolean;
}

export function mintPcPayload(o: PcMintOptions): Record<string, unknown> {
  const licensing = o.appLicensingVerdict === undefined ? 'LICENSED' : o.appLicensingVerdict;
  return {
    requestDetails: {
      requestPackageName: o.packageName,
      requestHash: createHash('sha256').update(o.nonce).digest('base64url'),
      requestTime: o.requestTime.toISOString(),
    },
    deviceIntegrity: { deviceRecognitionVerdict: o.verdicts ?? ['MEETS_PC_INTEGRITY'] },
    ...(licensing !== null ? { accountDetails: { appLicensingVerdict: licensing } } : {}),
    ...(o.isTestingResponse !== undefined
      ? { testingDetails: { isTestingResponse: o.isTestingResponse } }
      : {}),
  };
}
