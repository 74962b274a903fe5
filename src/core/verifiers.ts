import type { X509Certificate } from 'node:crypto';
import { defaultAppleRoots, parseTrustRoots } from './apple/trustRoots.js';
import type { KindPorts } from './kind.js';
import { KINDS } from './kinds.js';
import type { AllowlistReader, AndroidPackagePolicy, KeyMode } from './ports.js';
import type { PlatformVerifiers } from './verify.js';

/**
 * The platform table: one verifier per `device.service`, each kind's from the ports. For a live
 * API key (the default) pass Apple's roots only: test-only Play Integrity pairs and App Attest
 * keys registered by test keys are then refused. For a test key, pass Apple's roots plus the
 * development root.
 */
export function buildVerifiers(
  deps: Omit<KindPorts, 'mode'> & { mode?: KeyMode },
): PlatformVerifiers {
  const mode = deps.mode ?? 'live';
  const ports: KindPorts = {
    ...deps,
    mode,
    allowlist: mode === 'test' ? deps.allowlist : liveAllowlist(deps.allowlist),
  };
  const verifiers: PlatformVerifiers = {};
  for (const kind of KINDS) {
    const verifier = kind.verifier(ports);
    if (verifier) verifiers[kind.service] = verifier;
  }
  return verifiers;
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
