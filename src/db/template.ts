/**
 * A freshly initialised PGlite data directory, made once at build time and copied on a first
 * start: PGlite's initdb costs seconds of CPU, a copy a fraction of one. Migrations are not in
 * it: they stay the migrator's business, so a template from an older build is still correct.
 */
import {
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

// in dist/db, reached the same way from dist/db and from src/db (tests and tsx use the built one);
// with no build, there is none and initdb runs
const TEMPLATE_DIR = fileURLToPath(new URL('../../dist/db/pgdata-template', import.meta.url));
const MARKER = `${TEMPLATE_DIR}.json`;

/** The installed PGlite's version: a template from another version may not be readable by it. */
function pgliteVersion(): string {
  const entry = createRequire(import.meta.url).resolve('@electric-sql/pglite');
  return (
    JSON.parse(readFileSync(join(dirname(entry), '..', 'package.json'), 'utf8')) as {
      version: string;
    }
  ).version;
}

interface Marker {
  pglite?: string;
  /** every folder of the template: npm pack drops empty ones, and PostgreSQL needs them */
  dirs?: string[];
}

function usableTemplate(): Marker | null {
  try {
    const marker = JSON.parse(readFileSync(MARKER, 'utf8')) as Marker;
    return marker.pglite === pgliteVersion() &&
      Array.isArray(marker.dirs) &&
      existsSync(join(TEMPLATE_DIR, 'PG_VERSION'))
      ? marker
      : null;
  } catch {
    return null;
  }
}

/** The folders below `root`, relative to it, parents first. */
function foldersOf(root: string, below = ''): string[] {
  return readdirSync(join(root, below), { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .flatMap((e) => [join(below, e.name), ...foldersOf(root, join(below, e.name))]);
}

/**
 * Creates the PGlite directory `pgDir` (which must not exist) from the template when there is a
 * usable one; returns false when there is none (PGlite then initialises it itself). The copy goes
 * to a temporary name first, so an interrupted copy never looks like a database.
 */
export function createFromTemplate(pgDir: string): boolean {
  const marker = usableTemplate();
  if (!marker) return false;
  const partial = `${pgDir}.partial-${process.pid}`;
  rmSync(partial, { recursive: true, force: true });
  try {
    cpSync(TEMPLATE_DIR, partial, { recursive: true });
    // an installed package lacks the template's empty folders (pg_tblspc, pg_notify...)
    for (const dir of marker.dirs!) mkdirSync(join(partial, dir), { recursive: true });
    renameSync(partial, pgDir);
    return true;
  } catch {
    rmSync(partial, { recursive: true, force: true });
    return false;
  }
}

/** Builds the template in dist/db (run by `npm run build`). */
export async function buildTemplate(): Promise<string> {
  const partial = `${TEMPLATE_DIR}.partial`;
  rmSync(partial, { recursive: true, force: true });
  const { PGlite } = await import('@electric-sql/pglite');
  const pglite = await PGlite.create({ dataDir: partial });
  await pglite.close();
  const dirs = foldersOf(partial);
  rmSync(TEMPLATE_DIR, { recursive: true, force: true });
  renameSync(partial, TEMPLATE_DIR);
  writeFileSync(MARKER, JSON.stringify({ pglite: pgliteVersion(), dirs } satisfies Marker));
  return TEMPLATE_DIR;
}
