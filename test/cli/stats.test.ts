/**
 * `attest stats` in-process: on the embedded database through the running server's admin socket,
 * and directly on PostgreSQL. The counts are seeded as the instances' flushes store them.
 */
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { loadConfig } from '../../src/config.js';
import type { DatabaseHandle } from '../../src/db/database.js';
import type { StatsRow } from '../../src/db/statsDimensions.js';
import { createVerificationStatsRepository } from '../../src/db/verificationStats.js';
import { startServer, type RunningServer } from '../../src/server/start.js';
import { oneLine, runCli } from '../support/cli.js';
import { postgresBackend, type TestDatabase } from '../support/databases.js';
import { captureLogger } from '../support/service.js';
import { it } from '../support/fixtures.js';

const APP = 'ABCDE12345.com.example.bank';
const PKG = 'com.example.game';
const KEY1 = 'key0000000000001';
const KEY2 = 'key0000000000002';
const TEST_KEY = 'key0000000000003';

/** Rows of the last minutes, one of them three hours old. */
function seed(now: number): StatsRow[] {
  const minute = (ago: number) => new Date(Math.floor((now - ago) / 60_000) * 60_000);
  const base = { apiKeyId: KEY1, mode: 'live' as const, service: 'apple', app: APP };
  return [
    { ...base, minute: minute(120_000), outcome: 'valid', reason: '', count: 90 },
    { ...base, minute: minute(60_000), outcome: 'valid', reason: '', count: 10 },
    {
      ...base,
      minute: minute(60_000),
      outcome: 'rejected',
      reason: 'apple_counter_replay',
      count: 7,
    },
    {
      ...base,
      minute: minute(60_000),
      outcome: 'rejected',
      reason: 'apple_nonce_mismatch',
      count: 2,
    },
    {
      ...base,
      minute: minute(60_000),
      outcome: 'observed',
      reason: 'apple_risk_exceeded',
      count: 4,
    },
    {
      ...base,
      apiKeyId: KEY2,
      service: 'gms',
      app: PKG,
      minute: minute(60_000),
      outcome: 'rejected',
      reason: 'gms_play_protect',
      count: 5,
    },
    { ...base, minute: minute(3 * 3600_000), outcome: 'valid', reason: '', count: 1000 },
    // a test key's rehearsal: in no live figure
    {
      ...base,
      apiKeyId: TEST_KEY,
      mode: 'test' as const,
      minute: minute(60_000),
      outcome: 'valid',
      reason: '',
      count: 30,
    },
    {
      ...base,
      apiKeyId: TEST_KEY,
      mode: 'test' as const,
      minute: minute(60_000),
      outcome: 'rejected',
      reason: 'apple_counter_replay',
      count: 3,
    },
  ];
}

interface StatsJson {
  since: string;
  until: string;
  mode: string;
  rows: Record<string, unknown>[];
}

async function json(...args: string[]): Promise<StatsJson> {
  const run = await runCli('stats', '--json', ...args);
  expect(run.code, run.stderr).toBe(0);
  return JSON.parse(run.stdout) as StatsJson;
}

function statsSuite(handle: () => DatabaseHandle) {
  beforeAll(async () => {
    await createVerificationStatsRepository(handle().db).add({
      id: 'seed:1',
      rows: seed(Date.now()),
    });
  });

  it('--json: since and until, one row per app, outcome and reason summed over the window', async () => {
    const before = Date.now();
    const out = await json();
    expect(Object.keys(out)).toEqual(['since', 'until', 'mode', 'rows', 'rules', 'issuers']);
    // live keys only unless asked: the test key's 33 verifies are in no row
    expect(out.mode).toBe('live');
    // no app has an observed rule here
    expect((out as unknown as { rules: unknown[] }).rules).toEqual([]);
    expect(Math.abs(Date.parse(out.until) - before)).toBeLessThan(60_000);
    expect(Date.parse(out.until) - Date.parse(out.since)).toBe(24 * 3600_000);
    expect(out.rows).toEqual([
      { app: APP, mode: 'live', outcome: 'observed', reason: 'apple_risk_exceeded', count: 4 },
      { app: APP, mode: 'live', outcome: 'rejected', reason: 'apple_counter_replay', count: 7 },
      { app: APP, mode: 'live', outcome: 'rejected', reason: 'apple_nonce_mismatch', count: 2 },
      { app: APP, mode: 'live', outcome: 'valid', reason: null, count: 1100 },
      { app: PKG, mode: 'live', outcome: 'rejected', reason: 'gms_play_protect', count: 5 },
    ]);
  });

  it('--mode test counts the test keys alone, --mode all both, each row with its mode', async () => {
    const test = await json('--mode', 'test');
    expect(test.mode).toBe('test');
    expect(test.rows).toEqual([
      { app: APP, mode: 'test', outcome: 'rejected', reason: 'apple_counter_replay', count: 3 },
      { app: APP, mode: 'test', outcome: 'valid', reason: null, count: 30 },
    ]);
    const all = await json('--mode', 'all', '--since', '1h');
    expect(all.rows.filter((r) => r.outcome === 'valid')).toEqual([
      { app: APP, mode: 'live', outcome: 'valid', reason: null, count: 100 },
      { app: APP, mode: 'test', outcome: 'valid', reason: null, count: 30 },
    ]);
    const text = await runCli('stats', '--since', '1h', '--mode', 'test');
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout.split('\n')[0]).toMatch(/^verifications of test keys from /);
    expect(text.stdout).toMatch(
      new RegExp(`^${APP.replace(/\./g, '\\.')}\\s+30\\s+3\\s+0\\s+0$`, 'm'),
    );
  });

  it('--since (duration or ISO time) bounds the window', async () => {
    const lastHour = await json('--since', '1h');
    expect(lastHour.rows.find((r) => r.outcome === 'valid')).toMatchObject({ count: 100 });
    const iso = new Date(Date.now() - 5 * 3600_000).toISOString();
    const fromIso = await json('--since', iso);
    expect(fromIso.since).toBe(iso);
    expect(fromIso.rows.find((r) => r.outcome === 'valid')).toMatchObject({ count: 1100 });
  });

  it('--by names the rows by key, service, reason or minute', async () => {
    const byKey = await json('--by', 'key', '--since', '1h');
    expect(byKey.rows.map((r) => r.key)).toEqual([KEY1, KEY1, KEY1, KEY1, KEY2]);
    expect(Object.keys(byKey.rows[0]!)).toEqual(['key', 'mode', 'outcome', 'reason', 'count']);
    const byService = await json('--by', 'service', '--since', '1h');
    expect(byService.rows.filter((r) => r.service === 'gms')).toEqual([
      { service: 'gms', mode: 'live', outcome: 'rejected', reason: 'gms_play_protect', count: 5 },
    ]);
    const byReason = await json('--by', 'reason', '--since', '1h');
    expect(byReason.rows).toContainEqual({
      reason: 'apple_counter_replay',
      mode: 'live',
      outcome: 'rejected',
      count: 7,
    });
    const byMinute = await json('--by', 'minute', '--since', '1h');
    expect(new Set(byMinute.rows.map((r) => r.minute)).size).toBe(2);
    expect(
      byMinute.rows.every((r) => /^\d{4}-\d\d-\d\dT\d\d:\d\d:00Z$/.test(String(r.minute))),
    ).toBe(true);
  });

  it('--app, --key and --service filter (android names gms)', async () => {
    expect((await json('--app', PKG)).rows).toEqual([
      { app: PKG, mode: 'live', outcome: 'rejected', reason: 'gms_play_protect', count: 5 },
    ]);
    expect((await json('--key', KEY2)).rows).toHaveLength(1);
    expect((await json('--service', 'android')).rows).toHaveLength(1);
    expect((await json('--service', 'apple')).rows).toHaveLength(4);
    expect((await json('--app', 'ZZZZZ00000.com.none')).rows).toEqual([]);
  });

  it('the text view: per app valid / rejected / observed, and the top reasons of each', async () => {
    const run = await runCli('stats', '--since', '1h');
    expect(run.code, run.stderr).toBe(0);
    const lines = run.stdout.split('\n');
    expect(lines[0]).toMatch(/^verifications of live keys from \S+Z to \S+Z \(all instances\)$/);
    expect(lines[1]).toMatch(/^APP\s+VALID\s+REJECTED\s+OBSERVED\s+ERROR$/);
    expect(lines[2]).toMatch(new RegExp(`^${APP.replace(/\./g, '\\.')}\\s+100\\s+9\\s+4\\s+0$`));
    expect(lines[3]).toBe('  rejected: apple_counter_replay 7, apple_nonce_mismatch 2');
    expect(lines[4]).toBe('  observed: apple_risk_exceeded 4');
    expect(lines[5]).toMatch(/^com\.example\.game\s+0\s+5\s+0\s+0$/);
    const none = await runCli('stats', '--app', 'ZZZZZ00000.com.none');
    expect(none.stdout).toMatch(/no verifications counted in this window\n$/);
  });
}

describe('attest stats on the embedded database, through the running server', () => {
  let server: RunningServer;
  it.beforeAll(async ({ cliDataDir }) => {
    void cliDataDir;
    server = await startServer(
      loadConfig({ port: 0, host: '127.0.0.1' }),
      captureLogger('warn').logger,
      { migrate: false },
    );
  }, 120_000);
  afterAll(async () => {
    await server?.close();
  });
  statsSuite(() => server.database);

  it('bad --since, --by, --service, --key, and --watch with --json: one line, exit 2', async () => {
    for (const [args, message] of [
      [['--since', 'soon'], /--since takes a duration/],
      [['--since', '90'], /--since 90 has no unit/],
      [['--since', '2026-13-45T00:00:00Z'], /--since takes an ISO 8601 time/],
      [['--since', '2999-01-01T00:00:00Z'], /--since is in the future/],
      [['--by', 'device'], /--by takes one of app, reason, key, service, minute, got "device"/],
      [['--mode', 'prod'], /--mode takes one of live, test, all, got "prod"/],
      [['--service', 'windows'], /--service takes apple, or gms \(android, google\)/],
      [['--key', 'NOT-A-KEY'], /--key takes an API key id/],
      [['--app', 'two words'], /--app takes an App Attest app ID or an Android package/],
      [['--watch', '--json'], /--watch is a live view/],
      [['--watch', '--by', 'reason'], /--watch shows counts per app/],
    ] as const) {
      const run = await runCli('stats', ...args);
      expect(run.code, `${args.join(' ')}: ${run.stderr}`).toBe(2);
      expect(run.stdout).toBe('');
      expect(oneLine(run)).toMatch(message);
    }
    // allowlist add --enforce reports the share of one mode: a bad one is refused before anything changes
    const enforce = await runCli(
      'allowlist',
      'add',
      'apple',
      APP,
      '--enforce',
      'all',
      '--mode',
      'prod',
    );
    expect(enforce.code).toBe(2);
    expect(oneLine(enforce)).toMatch(/--mode takes one of live, test, all, got "prod"/);
  });
});

const pg = postgresBackend();
describe.skipIf(!pg)('attest stats directly on PostgreSQL (DATABASE_URL)', () => {
  let db: TestDatabase;
  it.beforeAll(async ({ cliPostgres }) => {
    db = cliPostgres;
  }, 120_000);
  statsSuite(() => db);
});
