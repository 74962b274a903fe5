import type { X509Certificate } from 'node:crypto';
import { androidRootsFromCertificates } from '../core/androidKey/trustRoots.js';
import { withDevelopmentRoot } from '../core/apple/trustRoots.js';
import { type ReceiptVerifier, withDevelopmentReceiptRoot } from '../core/apple/verifyReceipt.js';
import type {
  AllowlistReader,
  AppleKeyStore,
  DeviceVelocityStore,
  IntegrityTokenDecoder,
  KeyMode,
} from '../core/ports.js';
import { buildVerifiers } from '../core/verifiers.js';
import type { AndroidKeyDeps } from '../core/kind.js';
import type { PlatformVerifiers } from '../core/verify.js';

const FORCED_RELOAD_INTERVAL_MS = 1000;

export interface ModeVerifierDeps {
  /** `invalidate` forces the next read to reload (the cached allowlist) */
  allowlist: AllowlistReader & { invalidate?(): void };
  appleKeys: AppleKeyStore;
  /** Apple's root (or ATTEST_APPLE_ROOT_CA): trusted by both modes */
  appleRoots: readonly X509Certificate[];
  /** the development CA root (DER), or null before `attest dev init` */
  devRoot(): Promise<Uint8Array | null>;
  /** how long a read of the development root is used (a rotation reaches instances within it) */
  ttlMs: number;
  now?: () => number;
  /** Google's decodeIntegrityToken (standard Play Integrity requests) */
  googleDecoder?: IntegrityTokenDecoder;
  /** checks App Attest receipts (ATTEST_APPLE_RECEIPT_ROOT_CA or Apple Root CA - G3) */
  receipts?: ReceiptVerifier;
  /** Android key attestation: its store, root keys (both modes) and status list */
  android?: AndroidKeyDeps;
  /** per-device verify counts (`--max-verifies-per-device`), one store for both modes */
  velocity?: DeviceVelocityStore;
}

/**
 * The platform verifiers per API key mode. Live keys get Apple's roots; test keys also the
 * development root, re-read at most every `ttlMs`. Each mode has its own verifiers, so an
 * intermediate verified under the development root is never cached for live keys.
 */
export function createModeVerifiers(deps: ModeVerifierDeps): ((
  mode: KeyMode,
) => Promise<PlatformVerifiers>) & {
  /** the next test-mode request reads the development root again (`attest dev init --rotate`) */
  invalidate(): void;
} {
  const now = deps.now ?? Date.now;
  const decoder = {
    ...(deps.googleDecoder ? { googleDecoder: deps.googleDecoder } : {}),
    ...(deps.receipts ? { receipts: deps.receipts } : {}),
    ...(deps.velocity ? { velocity: deps.velocity } : {}),
  };
  const android = deps.android;
  const live = buildVerifiers({
    allowlist: deps.allowlist,
    appleKeys: deps.appleKeys,
    appleRoots: deps.appleRoots,
    mode: 'live',
    ...decoder,
    ...(android ? { android } : {}),
  });
  let test: { root: string; at: number; verifiers: PlatformVerifiers } | null = null;
  // `dev mint gms` adds a package's test-only pair on its first mint, and the RP verifies that
  // token at once: a package still cached without one is re-read (test keys only). At most once
  // a second per package: the reload drops the snapshot live requests use too, and a stream of
  // test-key requests for a package without a test pair had made every one of them a full reload.
  const allowlist = deps.allowlist;
  const lastReload = new Map<string, number>();
  const testAllowlist: AllowlistReader = {
    appleApp: (appId) => allowlist.appleApp(appId),
    appleApps: () => allowlist.appleApps(),
    androidPackages: () => allowlist.androidPackages(),
    androidPackage: async (name) => {
      const policy = await allowlist.androidPackage(name);
      if (!policy || policy.keys.some((k) => k.testOnly) || !allowlist.invalidate) return policy;
      const at = now();
      const last = lastReload.get(name);
      if (last !== undefined && at - last < FORCED_RELOAD_INTERVAL_MS) return policy;
      // only allowlisted names get here, so the map is as small as the allowlist
      lastReload.set(name, at);
      allowlist.invalidate();
      return allowlist.androidPackage(name);
    },
  };
  let loading: Promise<PlatformVerifiers> | null = null;

  const load = async (): Promise<PlatformVerifiers> => {
    const der = await deps.devRoot();
    const root = der ? Buffer.from(der).toString('base64') : '';
    if (test && test.root === root) {
      test.at = now();
      return test.verifiers;
    }
    // test keys trust receipts signed through the development CA too (`dev mint apple --receipt`)
    const receipts = withDevelopmentReceiptRoot(deps.receipts, der);
    const verifiers = buildVerifiers({
      allowlist: testAllowlist,
      appleKeys: deps.appleKeys,
      appleRoots: withDevelopmentRoot(deps.appleRoots, der),
      mode: 'test',
      ...decoder,
      ...(receipts ? { receipts } : {}),
      // test keys trust the development CA for android-key too
      ...(android
        ? {
            android: {
              ...android,
              roots: der
                ? [...android.roots, ...androidRootsFromCertificates([der])]
                : android.roots,
            },
          }
        : {}),
    });
    test = { root, at: now(), verifiers };
    return verifiers;
  };

  const verifiersFor = async (mode: KeyMode) => {
    if (mode === 'live') return live;
    // before `dev init` the root is looked for on every test request, so the first mint works at once
    if (test && test.root !== '' && now() - test.at < deps.ttlMs) return test.verifiers;
    // concurrent requests share one read
    loading ??= load().finally(() => {
      loading = null;
    });
    return loading;
  };
  return Object.assign(verifiersFor, {
    invalidate() {
      if (test) test.at = -Infinity;
    },
  });
}
