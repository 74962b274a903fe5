import { Rejection } from './reasons.js';

/**
 * The apps an API key may verify tokens of: App Attest app IDs (`TEAMID.bundle.id`) and Android
 * package names, compared as exact strings. `null` (or absent): every allowlisted app, as keys
 * without `--apps` always did. A scope narrows the allowlist, never widens it: an app in the scope
 * that is not allowlisted is still refused as before.
 */
export type AppScope = readonly string[] | null;

/** The most IDs one key's scope holds (a scope names the apps of one relying party). */
export const MAX_SCOPE_APPS = 64;

/**
 * Whether a key of this scope may see a verification (or a result token) of `appOrPackage`.
 * Exported for every route that must keep scoped keys to their apps.
 */
export function keyAllowsApp(scope: AppScope | undefined, appOrPackage: string): boolean {
  return scope === null || scope === undefined || scope.includes(appOrPackage);
}

/**
 * The scope check of the platform verifiers: throws `app_not_in_key_scope` when the key's scope
 * leaves out `appOrPackage`. Verifiers call it where the token's app is proven by signed bytes
 * (and allowlisted), before any policy rule and before any state change (key registration,
 * counter), so a token refused for its scope changes nothing.
 */
export function checkAppScope(
  scope: AppScope | undefined,
  appOrPackage: string,
  what: 'app ID' | 'package',
): void {
  if (keyAllowsApp(scope, appOrPackage)) return;
  throw new Rejection(
    'app_not_in_key_scope',
    `${what} "${appOrPackage}" is not among this API key's apps (${scope!.length} scoped)`,
  );
}
