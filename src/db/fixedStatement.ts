import type { Database } from './database.js';

type Driver =
  | {
      unsafe(text: string, params: unknown[], options: { prepare: boolean }): Promise<unknown[]>;
    }
  | {
      query(
        text: string,
        params: unknown[],
        options: { rowMode: 'object'; parsers: Record<number, (value: string) => unknown> },
      ): Promise<{ rows: unknown[] }>;
    };

// what drizzle's PGlite session leaves as text (postgres.js: drizzle set the same on the client)
const asText = (value: string) => value;
const PGLITE_OPTIONS = {
  rowMode: 'object' as const,
  // timestamp, timestamptz, interval, date
  parsers: { 1114: asText, 1184: asText, 1186: asText, 1082: asText },
};

/**
 * A statement whose text never changes, run on the driver under drizzle (postgres.js, prepared
 * unless the pool runs behind a pooler in transaction mode: client.ts decides; or PGlite) with
 * numbered parameters. For the statements every request runs (init's insert, a
 * session's consumption, an assertion's counter): building the text from a drizzle `sql` template
 * cost ~7 µs per call, 3-5% of those requests' CPU (docs/benchmark-http.md); here it is written
 * once. The rows are what `db.execute` returns (the same client, with drizzle's type parsers).
 * @param text the SQL with $1, $2 ... placeholders
 */
export function fixedStatement<Row>(
  text: string,
): (db: Database, params: unknown[]) => Promise<Row[]> {
  return async (db, params) => {
    const driver = (db as unknown as { $client: Driver }).$client;
    if ('unsafe' in driver) return (await driver.unsafe(text, params, { prepare: true })) as Row[];
    return (await driver.query(text, params, PGLITE_OPTIONS)).rows as Row[];
  };
}
