import { sql } from 'drizzle-orm';
import { windowStartOf } from '../core/deviceVelocity.js';
import type { DeviceLimit, DeviceVelocityStore, DeviceVerify, KeyMode } from '../core/ports.js';
import type { DeviceKeyService } from '../core/services.js';
import { dateOf } from './appleKeys.js';
import { rowsOf, type Database } from './database.js';
import { fixedWindowUpdate } from './fixedWindowUpdate.js';
import { fixedStatement } from './fixedStatement.js';

/**
 * Counts one verify in one statement, on any number of instances, only while the window holds
 * fewer than the limit ($7): the row of the key is locked by the upsert, and its count goes up by
 * one in the same window, or starts again at 1 in a newer window or under another period. A full
 * window updates nothing and returns no row: the refused verify is not counted. An instance whose
 * clock is behind (still in the previous window) counts into the newer window the row already
 * holds rather than moving it back. Live and test keys have rows of their own ($6).
 */
const COUNT = fixedStatement<{ count: string | number }>(`
  insert into device_velocity as d (service, key_id, period_seconds, window_start, count, last_at, mode)
  values ($1, $2, $3, $4::timestamptz, 1, $5::timestamptz, $6)
  on conflict (service, key_id, mode) ${fixedWindowUpdate(7)}
  returning count`);

/** What `attest devices show` tells of a registered key. */
export interface DeviceView {
  service: DeviceKeyService;
  /** the App Attest app ID or the Android package */
  app: string;
  /** App Attest only */
  environment: string | null;
  mode: KeyMode;
  registeredAt: Date;
  /** the latest verify known: App Attest keys record every one; android-key keys only counted ones */
  lastUsedAt: Date | null;
  /** the entry's `--max-verifies-per-device` today; null when it sets none (or is gone) */
  limit: DeviceLimit | null;
  /** the window holding `at` under that limit, with the verifies counted in it */
  window: { start: Date; end: Date; count: number } | null;
}

interface ShowRow {
  service: string;
  app: string;
  environment: string | null;
  mode: string;
  created_at: Date | string;
  last_used_at: Date | string | null;
  period_seconds: number | null;
  window_start: Date | string | null;
  count: string | number | null;
  last_at: Date | string | null;
  max: number | null;
  period: number | null;
}

/** Per-device verify counts: the verifiers' port, and what `attest devices show` reads. */
export function createDeviceVelocityRepository(db: Database): DeviceVelocityStore & {
  /** the count `verify`'s window holds now, without counting (verify-file) */
  peek(verify: DeviceVerify): Promise<number>;
  /** the key's registrations (normally one), as seen at `at`; empty when no key has this id */
  show(keyId: Uint8Array, at: Date): Promise<DeviceView[]>;
} {
  return {
    async count(verify) {
      const rows = await COUNT(db, [
        verify.service,
        Buffer.from(verify.keyId),
        verify.periodSeconds,
        verify.windowStart.toISOString(),
        verify.at.toISOString(),
        verify.mode ?? 'live',
        verify.max ?? null,
      ]);
      return rows[0] ? Number(rows[0].count) : null;
    },

    async peek(verify) {
      const rows = rowsOf<{ count: string | number }>(
        await db.execute(sql`
          select count from device_velocity
          where service = ${verify.service} and key_id = ${Buffer.from(verify.keyId)}
            and mode = ${verify.mode ?? 'live'}
            and period_seconds = ${verify.periodSeconds}
            and window_start >= ${verify.windowStart.toISOString()}::timestamptz`),
      );
      return rows[0] ? Number(rows[0].count) : 0;
    },

    async show(keyId, at) {
      const id = Buffer.from(keyId);
      const rows = rowsOf<ShowRow>(
        await db.execute(sql`
          select k.service, k.app, k.environment, k.mode, k.created_at, k.last_used_at,
                 v.period_seconds, v.window_start, v.count, v.last_at,
                 coalesce(a.max_verifies_per_device, p.max_verifies_per_device) as max,
                 coalesce(a.device_window_seconds, p.device_window_seconds) as period
          from (select 'apple' as service, app_id as app, environment, mode, created_at, last_used_at
                from apple_keys where key_id = ${id}
                union all
                select 'android-key', package_name, null, mode, created_at, null
                from android_keys where key_id = ${id}) k
          left join device_velocity v on v.service = k.service and v.key_id = ${id} and v.mode = k.mode
          left join apple_apps a on k.service = 'apple' and a.app_id = k.app
          left join android_packages p on k.service = 'android-key' and p.package_name = k.app
          order by k.service, k.mode`),
      );
      return rows.map((row) => {
        const limit =
          row.max === null || row.period === null
            ? null
            : { max: Number(row.max), periodSeconds: Number(row.period) };
        const stored = dateOf(row.window_start);
        let window: DeviceView['window'] = null;
        if (limit) {
          const start = windowStartOf(at, limit.periodSeconds);
          const current =
            stored !== null &&
            Number(row.period_seconds) === limit.periodSeconds &&
            stored.getTime() >= start.getTime();
          window = {
            start,
            end: new Date(start.getTime() + limit.periodSeconds * 1000),
            count: current ? Number(row.count) : 0,
          };
        }
        const used = [dateOf(row.last_used_at), dateOf(row.last_at)].filter(
          (d): d is Date => d !== null,
        );
        return {
          service: row.service === 'apple' ? 'apple' : 'android-key',
          app: row.app,
          environment: row.environment,
          mode: row.mode === 'test' ? 'test' : 'live',
          registeredAt: dateOf(row.created_at)!,
          lastUsedAt: used.length ? new Date(Math.max(...used.map((d) => d.getTime()))) : null,
          limit,
          window,
        };
      });
    },
  };
}
