import type { GoogleTokenDetails } from './gmsTokenDetails.js';
import type { PlayIntegrityPayload } from './playIntegrityPayload.js';

/** The newer verdict fields for RP telemetry, each only when the payload carries it. */
export function extensions(payload: PlayIntegrityPayload): Partial<GoogleTokenDetails> {
  const out: Partial<GoogleTokenDetails> = {};
  const licensing = payload.accountDetails?.appLicensingVerdict;
  if (licensing !== undefined) out.appLicensingVerdict = licensing;
  const protect = payload.environmentDetails?.playProtectVerdict;
  if (protect !== undefined) out.playProtectVerdict = protect;
  const apps = payload.environmentDetails?.appAccessRiskVerdict?.appsDetected;
  if (apps !== undefined) out.appsDetected = [...apps];
  const activity = payload.deviceIntegrity.recentDeviceActivity?.deviceActivityLevel;
  if (activity !== undefined) out.deviceActivityLevel = activity;
  const account = payload.accountDetails?.accountActivity?.activityLevel;
  if (account !== undefined) out.accountActivityLevel = account;
  const spoofing = payload.environmentDetails?.locationSpoofingRiskVerdict;
  if (spoofing !== undefined) out.locationSpoofingRiskVerdict = [...spoofing];
  const legacy = payload.deviceIntegrity.legacyDeviceRecognitionVerdict;
  if (legacy !== undefined) out.legacyDeviceIntegrityVerdicts = [...legacy];
  const recall = payload.deviceIntegrity.deviceRecall;
  if (recall !== undefined) {
    const dates = recall.writeDates;
    const writeDates = {
      ...(dates?.yyyymmFirst !== undefined ? { yyyymmFirst: dates.yyyymmFirst } : {}),
      ...(dates?.yyyymmSecond !== undefined ? { yyyymmSecond: dates.yyyymmSecond } : {}),
      ...(dates?.yyyymmThird !== undefined ? { yyyymmThird: dates.yyyymmThird } : {}),
    };
    out.deviceRecall = {
      ...recall.values,
      ...(Object.keys(writeDates).length > 0 ? { writeDates } : {}),
    };
  }
  const sdk = payload.deviceIntegrity.deviceAttributes?.sdkVersion;
  if (sdk !== undefined) out.sdkVersion = sdk;
  const version = payload.appIntegrity.versionCode;
  if (version !== undefined) out.versionCode = version;
  return out;
}
