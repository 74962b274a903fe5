import { encodeBase64 } from '../base64.js';
import type { AndroidKeyExtras } from './androidKeyTokenDetails.js';
import type { AndroidKeyRecord } from '../ports.js';
import type { PlatformDetails } from '../kinds.js';
import { lowerLevel } from './keyPolicy.js';

/** A registered key's answer: what `androidKeyDetails` shows of it. */
export function details(record: AndroidKeyRecord): PlatformDetails {
  const level = lowerLevel(record.attestationSecurityLevel, record.keyMintSecurityLevel);
  return {
    service: 'android-key',
    androidKeyDetails: {
      keyIdentifier: encodeBase64(record.keyId),
      packageName: record.packageName,
      // the policy refuses Software, so a key that got here is at least TrustedEnvironment
      securityLevel: level === 'StrongBox' ? 'StrongBox' : 'TrustedEnvironment',
      verifiedBootState: record.verifiedBootState,
      deviceLocked: record.deviceLocked,
      osPatchLevel: record.osPatchLevel,
      attestationVersion: record.attestationVersion,
      ...shownExtras(record.extras),
    },
  };
}

/** The extras as the answer shows them: copies, so no caller can change a cached record. */
function shownExtras(extras: AndroidKeyExtras | undefined): AndroidKeyExtras {
  if (!extras) return {};
  const out: AndroidKeyExtras = { ...extras };
  if (extras.unknownTags) out.unknownTags = [...extras.unknownTags];
  if (extras.provisioningInfo)
    out.provisioningInfo = {
      ...extras.provisioningInfo,
      entries: { ...extras.provisioningInfo.entries },
    };
  return out;
}
