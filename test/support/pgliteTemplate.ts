/**
 * vitest globalSetup: one migrated PGlite cluster, dumped once per run, that every test file's
 * in-memory database starts from. initdb and the migrations are most of what a fresh PGlite
 * costs, and on a loaded machine that cost, paid once per test file, is what ran hooks out of time.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { openMemoryDatabase } from '../../src/db/client.js';
import { runMigrations } from '../../src/db/migrate.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** path of the migrated PGlite data dir tar (see test/support/databases.ts) */
    pgliteTemplate: string;
  }
}

// made once for every project of the run (vitest calls this per project); removed after the last
let made: Promise<{ dir: string; tar: string }> | undefined;
let users = 0;

async function makeTemplate(): Promise<{ dir: string; tar: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'attest-pglite-template-'));
  const handle = await openMemoryDatabase();
  try {
    await runMigrations(handle);
    const tar = await handle.pglite.dumpDataDir('none');
    writeFileSync(join(dir, 'template.tar'), new Uint8Array(await tar.arrayBuffer()));
  } finally {
    await handle.close();
  }
  return { dir, tar: join(dir, 'template.tar') };
}

export default async function setup(project: TestProject): Promise<() => void> {
  users++;
  made ??= makeTemplate();
  const { dir, tar } = await made;
  project.provide('pgliteTemplate', tar);
  return () => {
    if (--users === 0) rmSync(dir, { recursive: true, force: true });
  };
}
