import type { AllowlistReader, AndroidPackagePolicy, AppleAppPolicy } from '../core/ports.js';
import type { AllowlistRepository } from './allowlist.js';

/**
 * The allowlist as the verifiers read it: a snapshot re-read at most every `ttlMs`, so removing
 * an app or package takes effect on every instance within that time without a query per token.
 */
export function createCachedAllowlist(
  repo: AllowlistRepository,
  options: { ttlMs: number; now?: () => number },
): AllowlistReader & { invalidate(): void } {
  const now = options.now ?? Date.now;
  interface Snapshot {
    at: number;
    apple: AppleAppPolicy[];
    android: AndroidPackagePolicy[];
  }
  let snapshot: Snapshot | null = null;
  let loading: Promise<Snapshot> | null = null;
  // bumped by invalidate: a reload that began before it must not become the snapshot
  let generation = 0;
  const current = async (): Promise<Snapshot> => {
    if (snapshot && now() - snapshot.at < options.ttlMs) return snapshot;
    // one reload at a time; concurrent readers share it
    if (!loading) {
      const started = generation;
      const load = (async (): Promise<Snapshot> => {
        const [apple, android] = await Promise.all([repo.listApple(), repo.listAndroid()]);
        const loaded: Snapshot = { at: now(), apple, android };
        if (started === generation) snapshot = loaded;
        return loaded;
      })();
      loading = load;
      const clear = () => {
        if (loading === load) loading = null;
      };
      load.then(clear, clear);
    }
    return loading;
  };
  return {
    appleApp: async (appId) => (await current()).apple.find((a) => a.appId === appId) ?? null,
    appleApps: async () => (await current()).apple,
    androidPackage: async (name) =>
      (await current()).android.find((p) => p.packageName === name) ?? null,
    androidPackages: async () => (await current()).android,
    invalidate: () => {
      snapshot = null;
      loading = null;
      generation++;
    },
  };
}
