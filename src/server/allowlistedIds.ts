import type { AllowlistReader } from '../core/types.js';

/**
 * The allowlisted App Attest app IDs and Android packages as a set read synchronously (the verify
 * counter asks on every failed verify), refreshed from the cached allowlist in the background at
 * most every `ttlMs` and at once after `invalidate`.
 */
export function allowlistedIds(
  allowlist: Pick<AllowlistReader, 'appleApps' | 'androidPackages'>,
  options: { ttlMs: number; now?: () => number; onError?: (err: unknown) => void },
) {
  const now = options.now ?? Date.now;
  let ids = new Set<string>();
  let readAt = -Infinity;
  let reading: Promise<void> | undefined;
  const refresh = (): Promise<void> => {
    reading ??= Promise.all([allowlist.appleApps(), allowlist.androidPackages()])
      .then(([apple, android]) => {
        ids = new Set([...apple.map((a) => a.appId), ...android.map((p) => p.packageName)]);
        readAt = now();
      })
      .catch((err: unknown) => {
        // the last set stays; the next ask tries again after ttlMs
        readAt = now();
        options.onError?.(err);
      })
      .finally(() => (reading = undefined));
    return reading;
  };
  return {
    has(id: string): boolean {
      if (now() - readAt >= options.ttlMs) void refresh();
      return ids.has(id);
    },
    refresh,
    invalidate(): void {
      readAt = -Infinity;
    },
  };
}
