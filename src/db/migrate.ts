import { readFileSync } from 'node:fs';
import { Fault } from '../core/fault.js';
import { fileURLToPath } from 'node:url';
import { sql } from 'drizzle-orm';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import { rowsOf, type Database, type DatabaseHandle } from './database.js';
import type { SecretBox } from './secretBox.js';
import { sealClearSecrets } from './secrets.js';
import { postgresTarget } from './postgresUrl.js';

/** Shipped next to the code (src/db and dist/db both sit two levels below the package root). */
export const MIGRATIONS_FOLDER = fileURLToPath(new URL('../../drizzle', import.meta.url));

// any constant works; it only has to be the same for every instance of attest
const MIGRATION_LOCK_ID = 0x61747465; // 'atte'

export interface MigrationStatus {
  name: string;
  createdAt: number;
  applied: boolean;
}

export interface SecretsStep {
  box: SecretBox;
  /** where the master key came from, for messages */
  source: string;
}

/**
 * Applies pending migrations, then (given the master key) seals secrets still in clear in one
 * transaction: the data step of the migration to sealed secrets, in TypeScript since SQL cannot
 * encrypt. On PostgreSQL a second connection holds a transaction-level advisory lock for the whole
 * run, so instances that start together migrate one after the other. A session-level lock would
 * stay behind a pooler in transaction mode on whichever server connection took it; the open
 * transaction keeps its server connection, and ends (releasing the lock) when this process does.
 */
export async function runMigrations(
  handle: DatabaseHandle,
  options: { onProgress?: (message: string) => void; secrets?: SecretsStep } = {},
): Promise<{ applied: number; sealed: number }> {
  const announce = (n: number) =>
    options.onProgress?.(`applying ${n} migration${n === 1 ? '' : 's'}…`);
  const secrets = options.secrets;
  const before = await migrationStatus(handle.db);
  const pending = before.filter((m) => !m.applied).length;
  const sealStep = async (db: Database) =>
    secrets ? (await sealClearSecrets(db, secrets.box, secrets.source)).sealed : 0;
  if (pending === 0) return { applied: 0, sealed: await sealStep(handle.db) };
  const [{ default: postgres }, { drizzle }, { migrate: migratePostgres }] = await Promise.all([
    import('postgres'),
    import('drizzle-orm/postgres-js'),
    import('drizzle-orm/postgres-js/migrator'),
  ]);
  const target = postgresTarget(handle.url!);
  // unnamed statements: through a pooler each statement may meet another server connection
  const single = () =>
    postgres(target.url, {
      ...target.options,
      max: 1,
      prepare: false,
      onnotice: () => {},
      connect_timeout: handle.connectTimeoutSeconds,
    });
  const holder = single();
  const client = single();
  let release = () => {};
  const done = new Promise<void>((resolve) => (release = resolve));
  let taken = () => {};
  const lockTaken = new Promise<void>((resolve) => (taken = resolve));
  const holding = holder.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(${MIGRATION_LOCK_ID})`;
    taken();
    await done;
  });
  try {
    // the lock, or the error that kept it from being taken
    await Promise.race([lockTaken, holding]);
    const locked = drizzle(client);
    const stillPending = (await migrationStatus(locked as unknown as Database)).filter(
      (m) => !m.applied,
    ).length;
    if (stillPending > 0) announce(stillPending);
    if (stillPending > 0) await migratePostgres(locked, { migrationsFolder: MIGRATIONS_FOLDER });
    return { applied: stillPending, sealed: await sealStep(locked as unknown as Database) };
  } finally {
    release(); // the lock's transaction commits
    await holding.catch(() => {});
    await Promise.all([client.end({ timeout: 5 }), holder.end({ timeout: 5 })]);
  }
}

/** The database lacks shipped migrations: the server refuses to start and commands refuse to run. */
export class MigrationsPendingError extends Fault {
  override readonly name = 'MigrationsPendingError';
  constructor(
    where: string,
    readonly pending: number,
  ) {
    super(
      'migrations_pending',
      `the database at ${where} lacks ${pending} migration(s): run "attest db migrate" (or start "attest serve" without --no-migrate)`,
    );
  }
}

/**
 * Throws MigrationsPendingError unless every shipped migration is applied; a database that cannot
 * be reached throws what the driver threw.
 */
export async function assertMigrated(handle: DatabaseHandle): Promise<void> {
  const pending = (await migrationStatus(handle.db)).filter((m) => !m.applied).length;
  if (pending > 0) throw new MigrationsPendingError(handle.where, pending);
}

/** Every shipped migration with whether the database has it. */
export async function migrationStatus(db: Database): Promise<MigrationStatus[]> {
  const files = readMigrationFiles({ migrationsFolder: MIGRATIONS_FOLDER });
  const journal = shippedMigrationNames();
  let appliedAt = new Set<number>();
  const exists = rowsOf<{ present: boolean }>(
    await db.execute(
      sql`select to_regclass('drizzle.__drizzle_migrations') is not null as present`,
    ),
  );
  if (exists[0]?.present) {
    const rows = rowsOf<{ created_at: string | number }>(
      await db.execute(sql`select created_at from drizzle.__drizzle_migrations`),
    );
    appliedAt = new Set(rows.map((r) => Number(r.created_at)));
  }
  const last = Math.max(0, ...appliedAt);
  return files.map((f, i) => ({
    name: journal[i] ?? `migration ${i}`,
    createdAt: f.folderMillis,
    // drizzle applies everything newer than the last applied one
    applied: appliedAt.has(f.folderMillis) || f.folderMillis <= last,
  }));
}

function shippedMigrationNames(): string[] {
  // readMigrationFiles does not return the tags; the journal next to the SQL files has them
  const journal = JSON.parse(readFileSync(`${MIGRATIONS_FOLDER}/meta/_journal.json`, 'utf8')) as {
    entries: { tag: string }[];
  };
  return journal.entries.map((e) => e.tag);
}
