import type { X509Certificate } from 'node:crypto';
import { createAppleVerifier } from './apple/appleVerifier.js';
import { defaultAppleRoots, parseTrustRoots } from './apple/trustRoots.js';
import type { ReceiptVerifier } from './apple/verifyReceipt.js';
import { createAndroidKeyVerifier } from './android/androidKeyVerifier.js';
import type { AndroidRootKey } from './android/trustRoots.js';
import { createGoogleVerifier } from './google/googleVerifier.js';
import { createGooglePcVerifier } from './googlePc/pcVerifier.js';
import type {
  AllowlistReader,
  AndroidKeyStore,
  AndroidPackagePolicy,
  AppleKeyStore,
  DeviceVelocityStore,
  IntegrityTokenDecoder,
  KeyMode,
  RevocationList,
} from './ports.js';
import type { PlatformVerifiers } from './verify.js';

/**
 * The platform table: one verifier per `device.service`. For a live API key (the default) pass
 * Apple's roots only: test-only Play Integrity pairs and App Attest keys registered by test keys
 * are then refused. For a test key, pass Apple's roots plus the development root.
 */
export function buildVerifiers(deps: {
  allowlist: AllowlistReader;
  appleKeys: AppleKeyStore;
  appleRoots: readonly X509Certificate[];
  mode?: KeyMode;
  /** Google's decodeIntegrityToken (standard requests); without it they are a fault */
  googleDecoder?: IntegrityTokenDecoder;
  /** checks App Attest receipts (default: against the built-in Apple Root CA - G3) */
  receipts?: ReceiptVerifier;
  /** Android key attestation; without it `android-key` tokens are `service_unsupported` */
  android?: AndroidKeyDeps;
  /**
   * per-device verify counts (App Attest and android-key keys), shared by every instance; without
   * it a verify for an entry with `--max-verifies-per-device` is a fault
   */
  velocity?: DeviceVelocityStore;
}): PlatformVerifiers {
  const velocity = deps.velocity ? { velocity: deps.velocity } : {};
  const mode = deps.mode ?? 'live';
  const allowlist = mode === 'test' ? deps.allowlist : liveAllowlist(deps.allowlist);
  return {
    apple: createAppleVerifier({
      roots: deps.appleRoots,
      allowlist,
      keys: deps.appleKeys,
      mode,
      ...(deps.receipts ? { receipts: deps.receipts } : {}),
      ...velocity,
    }),
    gms: createGoogleVerifier({
      allowlist,
      ...(deps.googleDecoder ? { decoder: deps.googleDecoder } : {}),
    }),
    'gms-pc': createGooglePcVerifier({
      allowlist,
      ...(deps.googleDecoder ? { decoder: deps.googleDecoder } : {}),
    }),
    ...(deps.android
      ? {
          'android-key': createAndroidKeyVerifier({
            roots: deps.android.roots,
            allowlist,
            keys: deps.android.keys,
            revocations: deps.android.revocations,
            mode,
            ...velocity,
          }),
        }
      : {}),
  };
}

/** What the Android key attestation verifier needs besides the allowlist. */
export interface AndroidKeyDeps {
  keys: AndroidKeyStore;
  /** root keys: `defaultAndroidRoots()`, or ATTEST_ANDROID_ROOT_CA's; test keys add the development CA */
  roots: readonly AndroidRootKey[];
  revocations: () => RevocationList | Promise<RevocationList>;
}

/** The allowlist as a live API key sees it: every package without its test-only key pairs. */
export function liveAllowlist(allowlist: AllowlistReader): AllowlistReader {
  const live = (p: AndroidPackagePolicy): AndroidPackagePolicy =>
    p.keys.some((k) => k.testOnly) ? { ...p, keys: p.keys.filter((k) => !k.testOnly) } : p;
  return {
    appleApp: (appId) => allowlist.appleApp(appId),
    appleApps: () => allowlist.appleApps(),
    androidPackage: async (name) => {
      const p = await allowlist.androidPackage(name);
      return p ? live(p) : null;
    },
    androidPackages: async () => (await allowlist.androidPackages()).map(live),
  };
}

/** Trust roots for App Attest: the PEM given (ATTEST_APPLE_ROOT_CA), else the built-in Apple root. */
export function loadAppleRoots(pem?: string): readonly X509Certificate[] {
  return pem === undefined ? defaultAppleRoots() : parseTrustRoots(pem);
}
