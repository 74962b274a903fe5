import type { AllowlistReader } from '../core/ports.js';

/**
 * Whether an App Attest app ID or Android package is allowlisted, asked of the allowlist the
 * verifiers read (its cached snapshot, reloaded after every change the server hears of): the
 * verify counter names a failed verify's app only then, so a rejection right after a rule
 * change or a new app is counted under its app, never under `other`.
 */
export function allowlistedApp(allowlist: Pick<AllowlistReader, 'appleApp' | 'androidPackage'>) {
  return async (app: string): Promise<boolean> =>
    (await allowlist.appleApp(app)) !== null || (await allowlist.androidPackage(app)) !== null;
}
