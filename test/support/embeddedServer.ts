/**
 * vitest globalSetup: one embedded PostgreSQL server for the whole run, started as attest starts
 * its own (src/db/embeddedServer.ts), with a migrated template database that each test file's
 * database is created from (`create database ... template`): initdb and the migrations are paid
 * once per run, a test file's database costs a file copy.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import type { TestProject } from 'vitest/node';
import { openDatabase } from '../../src/db/client.js';
import { createCluster, startServer, type EmbeddedServer } from '../../src/db/embeddedServer.js';
import { runMigrations } from '../../src/db/migrate.js';
import { postgresTarget } from '../../src/db/postgresUrl.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** the run's embedded server, its `postgres` database (see test/support/databases.ts) */
    embeddedUrl: string;
  }
}

export const TEMPLATE_DATABASE = 'attest_template';

// made once for every project of the run (vitest calls this per project, in module instances of
// its own: the state lives on globalThis); stopped after the last
const shared = globalThis as typeof globalThis & {
  attestEmbeddedTests?: { made?: Promise<{ dir: string; server: EmbeddedServer }>; users: number };
};
const state = (shared.attestEmbeddedTests ??= { users: 0 });

/** `url` with another database name. */
export function databaseUrl(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

export function adminClient(url: string) {
  const target = postgresTarget(url);
  return postgres(target.url, {
    ...target.options,
    max: 1,
    onnotice: () => {},
  });
}

async function start(): Promise<{ dir: string; server: EmbeddedServer }> {
  const dir = mkdtempSync(join(tmpdir(), 'attest-embedded-tests-'));
  createCluster(dir);
  const server = await startServer(dir);
  const admin = adminClient(server.url);
  try {
    // a test run keeps nothing: no fsync, as the suite's speed needs on a loaded machine
    // (synchronous_commit stays on: tests check that attest's sessions keep it)
    await admin`alter system set fsync = off`;
    await admin`alter system set full_page_writes = off`;
    await admin`select pg_reload_conf()`;
    await admin.unsafe(`create database ${TEMPLATE_DATABASE}`);
  } finally {
    await admin.end();
  }
  const handle = await openDatabase({
    url: databaseUrl(server.url, TEMPLATE_DATABASE),
    dataDir: '',
    role: 'cli',
  });
  try {
    await runMigrations(handle);
  } finally {
    await handle.close();
  }
  return { dir, server };
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  state.users++;
  state.made ??= start();
  const { dir, server } = await state.made;
  project.provide('embeddedUrl', server.url);
  return async () => {
    if (--state.users > 0) return;
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  };
}
