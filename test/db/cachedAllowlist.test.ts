/**
 * The cached allowlist under announced changes: `invalidate` (a NOTIFY, reloadNow) makes the next
 * read reload, and a reload that began before the invalidation never becomes the snapshot, so
 * an instance cannot keep the state from before a change it was told of.
 */
import { describe, expect, it } from 'vitest';
import type { AppleAppPolicy } from '../../src/core/ports.js';
import { createCachedAllowlist } from '../../src/db/cachedAllowlist.js';
import type { AllowlistRepository } from '../../src/db/allowlist.js';

function controlledRepo() {
  let apps: AppleAppPolicy[] = [];
  const pending: (() => void)[] = [];
  let hold = false;
  const repo = {
    listApple: async () => {
      const seen = apps;
      if (hold) await new Promise<void>((resolve) => pending.push(resolve));
      return seen;
    },
    listAndroid: async () => [],
  } as unknown as AllowlistRepository;
  return {
    repo,
    set: (next: AppleAppPolicy[]) => (apps = next),
    hold: (on: boolean) => (hold = on),
    release: () => pending.splice(0).forEach((r) => r()),
  };
}

const app = (appId: string): AppleAppPolicy => ({ appId, env: 'production' });

describe('createCachedAllowlist', () => {
  it('serves the snapshot until invalidated, then reloads', async () => {
    const c = controlledRepo();
    const cached = createCachedAllowlist(c.repo, { ttlMs: 60_000 });
    expect(await cached.appleApps()).toEqual([]);
    c.set([app('A')]);
    expect(await cached.appleApps()).toEqual([]);
    cached.invalidate();
    expect(await cached.appleApps()).toEqual([app('A')]);
  });

  it('a reload begun before an invalidation does not become the snapshot', async () => {
    const c = controlledRepo();
    const cached = createCachedAllowlist(c.repo, { ttlMs: 60_000 });
    c.hold(true);
    const stale = cached.appleApps(); // reads [] and waits
    await Promise.resolve();
    c.set([app('B')]);
    cached.invalidate();
    c.hold(false);
    expect(await cached.appleApps()).toEqual([app('B')]);
    c.release();
    expect(await stale).toEqual([]);
    // the late, older result did not replace the newer snapshot
    expect(await cached.appleApps()).toEqual([app('B')]);
  });
});
