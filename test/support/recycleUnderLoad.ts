/**
 * A child process for test/db/recycleUnderLoad.test.ts: opens a PostgreSQL pool as the server does
 * and, ROUNDS times, replaces it (DatabaseHandle.recycle, as the pool watchdog does) while 64
 * statements are in flight and its connections are still starting. Prints one JSON line with the
 * rejections the statements saw and exits 0, unless a rejection nobody could handle ended it.
 * Usage: tsx test/support/recycleUnderLoad.ts URL ROUNDS
 */
import { sql } from 'drizzle-orm';
import { openDatabase } from '../../src/db/client.js';
import { ignoredDriverRejections } from '../../src/db/driverRejections.js';
import { isConnectionError } from '../../src/db/errors.js';
import { migrationStatus } from '../../src/db/migrate.js';
import { createSessionRepository } from '../../src/db/sessions.js';

const [url, rounds] = process.argv.slice(2) as [string, string];
const handle = await openDatabase({ url, dataDir: '', role: 'server', poolSize: 4 });
const sessions = createSessionRepository(handle.db);
let rejected = 0;
let notConnection = 0;
for (let round = 0; round < Number(rounds); round++) {
  const work: Promise<unknown>[] = [];
  for (let i = 0; i < 16; i++) {
    work.push(sessions.consume(`ses_nothing_${i}`, 'key'));
    work.push(migrationStatus(handle.db));
    work.push(handle.db.execute(sql`select pg_sleep(0.05)`));
    work.push(handle.db.execute(sql`select 1`));
  }
  await new Promise((resolve) => setTimeout(resolve, 5));
  await handle.recycle!();
  for (const result of await Promise.allSettled(work)) {
    if (result.status === 'fulfilled') continue;
    rejected++;
    if (!isConnectionError(result.reason)) notConnection++;
  }
}
// a driver rejection nobody awaits surfaces a turn or two after its connection is destroyed
await new Promise((resolve) => setTimeout(resolve, 200));
await handle.close();
process.stdout.write(
  `${JSON.stringify({ rejected, notConnection, ignored: ignoredDriverRejections() })}\n`,
);
