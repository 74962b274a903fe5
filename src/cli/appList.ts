import { MAX_SCOPE_APPS } from '../core/appScope.js';
import { usageError } from './errors.js';
import { ANDROID_PACKAGE } from './kinds/androidPackage.js';
import { APPLE_APP_ID } from './kinds/apple/appleAppId.js';
import { safeText } from './terminalText.js';

/**
 * An API key's scope as given on the command line (`keys create --apps`, `verify-file
 * --key-apps`): comma-separated App Attest app IDs and Android packages, by the allowlist's own
 * rules (they need not be allowlisted yet); at least one, none empty. Repeats are dropped.
 */
export function parseAppList(value: string, flag: string): string[] {
  const ids = value.split(',').map((s) => s.trim());
  if (ids.every((s) => s === ''))
    throw usageError(
      `${flag} needs at least one app ID or package; for every allowlisted app, leave it out (keys update: --all-apps)`,
    );
  for (const id of ids) {
    if (id === '') throw usageError(`${flag} has an empty entry (two commas, or one at an end)`);
    if (id.length > 256 || (!APPLE_APP_ID.test(id) && !ANDROID_PACKAGE.test(id)))
      throw usageError(
        `${flag}: "${safeText(id.slice(0, 80))}" is neither an App Attest app ID (TEAMID.bundle.id) nor an Android package name`,
      );
  }
  const unique = [...new Set(ids)];
  if (unique.length > MAX_SCOPE_APPS)
    throw usageError(`${flag} takes at most ${MAX_SCOPE_APPS} app IDs and packages`);
  return unique;
}
