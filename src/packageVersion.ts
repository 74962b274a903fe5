import { readFileSync } from 'node:fs';

/**
 * This package's own version. Not npm_package_version: npm sets that to the version of whatever
 * project `npm exec` runs in. src/ and dist/ both sit one level below the package root.
 */
export function packageVersion(): string {
  const manifest = JSON.parse(
    readFileSync(new URL('../package.json', import.meta.url), 'utf8'),
  ) as { version: string };
  return manifest.version;
}
