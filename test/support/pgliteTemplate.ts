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

export default async function setup(project: TestProject): Promise<() => void> {
  const dir = mkdtempSync(join(tmpdir(), 'attest-pglite-template-'));
  const handle = await openMemoryDatabase();
  try {
    await runMigrations(handle);
    const tar = await handle.pglite.dumpDataDir('none');
    writeFileSync(join(dir, 'template.tar'), new Uint8Array(await tar.arrayBuffer()));
  } finally {
    await handle.close();
  }
  project.provide('pgliteTemplate', join(dir, 'template.tar'));
  return () => rmSync(dir, { recursive: true, force: true });
}
