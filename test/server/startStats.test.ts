/**
 * The statistics as `serve` wires them, on both databases: a flush that fails keeps the counts
 * and says so once; beyond the bound the oldest counts are dropped with a warning naming how
 * many; when the table takes writes again the kept counts arrive once.
 */
import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createVerificationStatsRepository } from '../../src/db/verificationStats.js';
import type { CountedVerify } from '../../src/server/statsRecorder.js';
import { startStats } from '../../src/server/startStats.js';
import { backends, useDatabase } from '../support/databases.js';
import { captureLogger } from '../support/service.js';

const MINUTE = Math.floor(Date.now() / 60_000) * 60_000 + 30_000;

const valid = (app: string): CountedVerify => ({
  apiKeyId: 'key0000000000001',
  mode: 'live',
  service: 'apple',
  app,
  result: { outcome: 'valid', observed: [] },
});

describe.each(backends())('statistics wired as serve wires them, on $name', (backend) => {
  const db = useDatabase(backend);

  it('the database refusing writes: counts kept, one warning, the oldest dropped with their number, then written once', async () => {
    const { logger, capture } = captureLogger('info');
    const noApps = { appleApps: async () => [], androidPackages: async () => [] };
    const stats = await startStats(db, loadConfig({}, {}), logger, noApps, {
      propagationMs: 5000,
      statsMaxPendingRows: 2,
      // one minute throughout, whatever the wall clock does meanwhile
      statsNow: () => MINUTE,
    });
    const recorder = stats.recorder!;
    const away = sql.raw('alter table verification_stats rename to verification_stats_away');
    const back = sql.raw('alter table verification_stats_away rename to verification_stats');
    await db.db.execute(away);
    try {
      recorder.record(valid('A'));
      await recorder.flush();
      recorder.record(valid('A'));
      await recorder.flush();
      const warnings = capture.lines.filter((l) => l.level === 40).map((l) => l.msg);
      expect(warnings).toEqual([
        'could not write verification statistics: they are kept in memory and retried',
      ]);
      // the failed batch (A) is kept as it was, under its id, beside the newer count (A again)
      expect(recorder.pendingRows()).toBe(2);
      // a third row in the same minute: beyond the bound, that minute goes (3 counts)
      recorder.record(valid('B'));
      const dropped = capture.lines.find((l) => String(l.msg).startsWith('dropped'));
      expect(dropped).toMatchObject({
        level: 40,
        msg: 'dropped 3 verification counts (the oldest 1 minute(s)) that could not be written to the database',
        droppedCounts: 3,
        droppedRows: 3,
      });
      expect(recorder.pendingRows()).toBe(0);
      recorder.record(valid('D'));
    } finally {
      await db.db.execute(back);
    }
    await recorder.flush();
    expect(capture.lines.map((l) => l.msg)).toContain('verification statistics are written again');
    const totals = await createVerificationStatsRepository(db.db).totals({
      since: new Date(Date.now() - 3600_000),
      until: new Date(Date.now() + 60_000),
      by: 'app',
    });
    expect(totals).toEqual([
      { value: 'D', mode: 'live', outcome: 'valid', reason: null, count: 1 },
    ]);
    await recorder.stop();
  });
});
