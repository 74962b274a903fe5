/**
 * drizzle's client knows every table: src/db/tables.ts gathers schema.ts and each *Schema.ts
 * module beside it (the files drizzle-kit reads, drizzle.config.ts), so a table added in a new
 * module and forgotten there fails here.
 */
import { readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { is } from 'drizzle-orm';
import { getTableConfig, PgTable } from 'drizzle-orm/pg-core';
import { expect, it } from 'vitest';
import { tables } from '../../src/db/tables.js';

const DB = resolve(import.meta.dirname, '..', '..', 'src', 'db');
const MODULES = readdirSync(DB).filter((f) => /^(schema|\w+Schema)\.ts$/.test(f));

it('tables.ts holds every table of schema.ts and the *Schema.ts modules', async () => {
  expect(MODULES).toContain('schema.ts');
  expect(MODULES.length).toBeGreaterThan(1);
  const gathered = new Set(Object.values(tables) as unknown[]);
  const missing: string[] = [];
  let seen = 0;
  for (const file of MODULES) {
    const exported = (await import(pathToFileURL(join(DB, file)).href)) as Record<string, unknown>;
    for (const value of Object.values(exported)) {
      if (!is(value, PgTable)) continue;
      seen += 1;
      if (!gathered.has(value)) missing.push(`${file}: ${getTableConfig(value).name}`);
    }
  }
  expect(missing).toEqual([]);
  expect(seen).toBe((Object.values(tables) as unknown[]).filter((v) => is(v, PgTable)).length);
});
