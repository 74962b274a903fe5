import type { AndroidPackagePolicy } from '../ports.js';

type PolicyDefaults = Required<
  Omit<AndroidPackagePolicy, 'packageName' | 'keys' | 'serviceAccount'>
>;

/**
 * What an Android allowlist entry holds for each policy field the operator leaves unset: the
 * database column defaults, `allowlist add android`, `verify-file --package` and the verifier all
 * read it here (docs/token-format.md section 4, docs/play-integrity.md).
 */
export const DEFAULT_ANDROID_POLICY = {
  certificateDigests: [],
  minVerdict: 'MEETS_DEVICE_INTEGRITY',
  allowUnrecognized: false,
  maxAgeSeconds: 600,
  requireLicensed: false,
  playProtectVerdicts: [],
  denyAppAccessRisk: [],
  maxDeviceActivity: null,
  denyRecallBits: [],
  minAccountActivity: null,
  denyLocationSpoofing: [],
  keyAttestation: false,
  minSecurityLevel: 'TrustedEnvironment',
  allowUnlocked: false,
  bootKeys: [],
  maxPatchAgeMonths: null,
  observe: [],
  maxVerifiesPerDevice: null,
  maxKeysPerIssuer: null,
} as const satisfies PolicyDefaults;
