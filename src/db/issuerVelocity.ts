import { sql } from 'drizzle-orm';
import type { IssuerVelocityStore } from '../core/androidKey/issuerVelocity.js';
import type { KeyMode } from '../core/ports.js';
import { dateOf } from './appleKeys.js';
import { rowsOf, type Database } from './database.js';
import { fixedWindowUpdate } from './fixedWindowUpdate.js';
import { fixedStatement } from './fixedStatement.js';

/**
 * Counts one new key under its issuing certificate in one statement, on any number of
 * instances: the upsert locks the (package, issuer, mode) row, so concurrent registrations are
 * counted one after the other and each sees the count the previous one left. The count goes up
 * by one in the same window, or starts again at 1 in a newer window or under another period; with
 * a limit ($9) a full window updates nothing and returns no row (the refused key is not counted).
 * Without one (an observed rule) every key counts. Live and test keys have rows of their own ($3).
 */
const COUNT = fixedStatement<{ count: string | number }>(`
  insert into android_issuer_velocity as d
    (package_name, issuer, mode, period_seconds, window_start, count, serial, subject, last_at)
  values ($1, $2, $3, $4, $5::timestamptz, 1, $6, $7, $8::timestamptz)
  on conflict (package_name, issuer, mode) ${fixedWindowUpdate(9)}
  returning count`);

/** One issuing certificate's count in its package's current window, as `attest stats` shows it. */
export interface IssuerUsage {
  packageName: string;
  serial: string;
  subject: string;
  mode: KeyMode;
  count: number;
  /** the package's N and window today */
  max: number;
  periodSeconds: number;
  windowStart: Date;
  lastAt: Date;
}

/** The per-issuer counts: the verifier's port, and what `attest stats` reads. */
export function createIssuerVelocityRepository(db: Database): IssuerVelocityStore & {
  /**
   * The issuers nearest their package's limit (count / N, highest first) in the window holding
   * `at`, of one mode; only packages that set a limit, only windows still current.
   */
  nearest(options: { at: Date; mode: KeyMode | 'all'; limit: number }): Promise<IssuerUsage[]>;
} {
  return {
    async count(entry) {
      const rows = await COUNT(db, [
        entry.packageName,
        Buffer.from(entry.issuer),
        entry.mode,
        entry.periodSeconds,
        entry.windowStart.toISOString(),
        entry.serial,
        entry.subject,
        entry.at.toISOString(),
        entry.max ?? null,
      ]);
      return rows[0] ? Number(rows[0].count) : null;
    },

    async nearest({ at, mode, limit }) {
      const rows = rowsOf<{
        package_name: string;
        serial: string;
        subject: string;
        mode: string;
        count: string | number;
        limit_text: string;
        period_seconds: number;
        window_start: Date | string;
        last_at: Date | string;
      }>(
        await db.execute(sql`
          select v.package_name, v.serial, v.subject, v.mode, v.count, p.max_keys_per_issuer as limit_text,
                 v.period_seconds, v.window_start, v.last_at
          from android_issuer_velocity v
          join android_packages p on p.package_name = v.package_name and p.max_keys_per_issuer is not null
          where (${mode} = 'all' or v.mode = ${mode})
            -- the row's window is the current one of the package's period
            and v.period_seconds = split_part(p.max_keys_per_issuer, '/', 2)::integer
            and v.window_start + make_interval(secs => v.period_seconds) > ${at.toISOString()}::timestamptz
          order by v.count::float8 / split_part(p.max_keys_per_issuer, '/', 1)::float8 desc, v.last_at desc
          limit ${limit}`),
      );
      return rows.map((r) => {
        const [max] = r.limit_text.split('/');
        return {
          packageName: r.package_name,
          serial: r.serial,
          subject: r.subject,
          mode: r.mode as KeyMode,
          count: Number(r.count),
          max: Number(max),
          periodSeconds: r.period_seconds,
          windowStart: dateOf(r.window_start)!,
          lastAt: dateOf(r.last_at)!,
        };
      });
    },
  };
}
