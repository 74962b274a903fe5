/**
 * The HTTP benchmark in miniature (embedded database, one short run per scenario): every
 * scenario ran and every answer was the expected one, and the replays are refused. Its numbers
 * are not looked at: this only keeps `npm run bench:http` working.
 */
import { beforeAll, expect, it } from 'vitest';
import { runHttpBench } from '../../bench/http/harness.js';
import type { BenchResult, ScenarioResult } from '../../bench/http/harness.js';
import { readmeSection, svgChart, table, verdicts, verdictTable } from '../../bench/http/report.js';
import { buildOnce } from '../support/binary.js';

// the benchmark runs the built binary, as `npm run bench:http` builds it
beforeAll(buildOnce, 180_000);
it('runs every scenario with correct answers and refuses the replays', async () => {
  const result = await runHttpBench({
    connections: [2],
    seconds: 1,
    // a count, not a window: on a loaded machine a 1-second window can close before an answer
    requestsPerScenario: 20,
    registrations: 6,
    warmupSeconds: 0,
    // the --workers server, on a data dir of its own
    workers: 2,
  });
  expect(result.results.map((r) => r.scenario)).toEqual([
    'hello-world',
    'init',
    'play integrity, sessionless',
    'play integrity, sessionless, result token',
    'result token consume',
    'app attest assertion, sessionless',
    'app attest assertion, sessionless, twin, statistics on',
    'app attest assertion, sessionless, twin, statistics off',
    'app attest assertion, sessionless, 2 workers',
    'app attest registration',
    'android-key assertion, sessionless',
    'android-key registration',
    'garbage token',
    'session: init + verify',
  ]);
  for (const r of result.results) {
    expect({
      scenario: r.scenario,
      wrong: r.wrong,
      errors: r.errors,
      sample: r.sampleWrong,
    }).toEqual({ scenario: r.scenario, wrong: 0, errors: 0, sample: undefined });
    expect(r.correct, r.scenario).toBeGreaterThan(0);
    expect(r.ratio, r.scenario).toBeGreaterThan(0);
    // the server's own view of each of its runs: event-loop delay and GC pauses in between
    if (r.target === 'attest') {
      expect(r.server!.loopDelayP99Ms, r.scenario).toBeGreaterThan(0);
      expect(r.server!.gcCount, r.scenario).toBeGreaterThanOrEqual(0);
      expect(r.server!.gcMs, r.scenario).toBeGreaterThanOrEqual(0);
    } else expect(r.server).toBeUndefined();
  }
  // every target of the embedded default can be judged on a run of every scenario
  expect(result.database).toBe('embedded');
  const judged = verdicts(result, 2);
  expect(judged.map((v) => v.target)).toEqual([
    'App Attest assertion, sessionless',
    'App Attest assertion, CPU per answer (attest and its database)',
    'verify with a result-token key vs without',
    'assertion with statistics vs without (ATTEST_STATS=off)',
    'RSS after the whole run (attest and its database)',
  ]);
  for (const v of judged) expect(typeof v.met, v.target).toBe('boolean');
  expect(verdictTable(judged, 2)).toMatch(/^\| target \(2 connections\) \|/);
  const section = readmeSection(result, 2);
  expect(section).toMatch(/^Embedded \(the owned PostgreSQL 18 server\), 2 connections/);
  expect(section).toContain('| App Attest registration (each key once) |');
  expect(section).toContain('| target (2 connections) |');
  expect(result.results.find((r) => r.scenario === 'app attest registration')!.correct).toBe(6);
  // the used assertion and registration, sent again, are refused: the counter and the key were stored
  expect(result.replay.assertion).toBe('200 {"isValid":false,"statusCode":0}');
  expect(result.replay.registration).toBe('200 {"isValid":false,"statusCode":0}');
  // the consumed result token, consumed again, is alreadyConsumed: its jti was recorded
  expect(result.replay.consume).toBe('200 {"valid":true,"alreadyConsumed":true');
  expect(result.results.find((r) => r.scenario === 'result token consume')!.correct).toBe(12);
  expect(table(result)).toContain('| app attest registration | 2 |');
  // the yardstick ran before and after the scenarios, and the better run is the one reported
  const hello = result.results[0]!;
  expect(hello.helloRuns).toHaveLength(2);
  // both runs answered (the row's wrong and errors, checked above, add up both)
  for (const rps of hello.helloRuns!) expect(rps).toBeGreaterThan(0);
  expect(hello.rps).toBe(Math.max(...hello.helloRuns!));
  expect(table(result)).toContain('| hello-world (better of 2) | 2 |');
  expect(svgChart(result)).toMatch(/^<svg[\s\S]*<\/svg>$/);
}, 240_000);

it('judges each target: met at the bound, missed past it, not run when its scenario is absent', () => {
  const row = (scenario: string, ratio: number, extra: Partial<ScenarioResult> = {}) =>
    ({
      scenario,
      connections: 64,
      ratio,
      rps: ratio * 1000,
      p99: 20,
      cpuMsPerRequest: 0.3,
      target: scenario === 'hello-world' ? 'hello' : 'attest',
      ...extra,
    }) as ScenarioResult;
  const judge = (result: Partial<BenchResult>) =>
    Object.fromEntries(
      verdicts({ database: 'postgres', serverRssAfterMb: 160, ...result } as BenchResult).map(
        (v) => [v.target, v.met],
      ),
    );
  expect(
    judge({
      results: [
        row('hello-world', 1, { p99: 99 }),
        row('play integrity, sessionless', 0.5),
        row('play integrity, sessionless, result token', 0.45),
        row('app attest assertion, sessionless', 0.45, { cpuMsPerRequest: 0.25, p99: 50 }),
        // 675 of 450 req/s: 1.5x, at 0.275 ms per answer: 10% more
        row('app attest assertion, sessionless, 2 workers', 0.675, { cpuMsPerRequest: 0.275 }),
        // 500 of 520 req/s: 96.2%
        row('app attest assertion, sessionless, twin, statistics on', 0.5),
        row('app attest assertion, sessionless, twin, statistics off', 0.52),
        row('app attest registration', 0.12, { p99: 300 }),
      ],
    }),
  ).toEqual({
    'App Attest assertion, sessionless': true,
    'App Attest assertion, CPU per answer': true,
    'App Attest assertion, p99': true,
    'App Attest registration': true,
    'App Attest assertion, --workers 2 vs one process': true,
    'the same, CPU per answer vs one process': true,
    // 450 of 500 req/s: 90%
    'verify with a result-token key vs without': true,
    'assertion with statistics vs without (ATTEST_STATS=off)': true,
    'server RSS after the whole run': true,
  });
  expect(
    judge({
      serverRssAfterMb: 161,
      results: [
        row('app attest assertion, sessionless', 0.449, { cpuMsPerRequest: 0.251, p99: 51 }),
        row('app attest assertion, sessionless, 2 workers', 0.67, { cpuMsPerRequest: 0.28 }),
        row('app attest registration', 0.119),
      ],
    }),
  ).toEqual({
    'App Attest assertion, sessionless': false,
    'App Attest assertion, CPU per answer': false,
    'App Attest assertion, p99': false,
    'App Attest registration': false,
    'App Attest assertion, --workers 2 vs one process': false,
    'the same, CPU per answer vs one process': false,
    'verify with a result-token key vs without': null,
    'assertion with statistics vs without (ATTEST_STATS=off)': null,
    'server RSS after the whole run': false,
  });
  const measured = verdicts({
    database: 'postgres',
    serverRssAfterMb: 300,
    serverRssSettledMb: 150,
    results: [],
  } as unknown as BenchResult).find((v) => v.target === 'server RSS after the whole run')!;
  expect(measured.measured).toBe('300 MB (150 MB once idle)');
});

it("judges the embedded default by its own targets: the assertion, its CPU with the database, the tree's RSS", () => {
  const row = (scenario: string, ratio: number, treeCpuMsPerRequest: number) =>
    ({
      scenario,
      connections: 64,
      ratio,
      rps: ratio * 1000,
      p99: 20,
      cpuMsPerRequest: 0.1,
      treeCpuMsPerRequest,
    }) as ScenarioResult;
  const judge = (treeRssAfterMb: number, ...results: ScenarioResult[]) =>
    Object.fromEntries(
      verdicts({
        database: 'embedded',
        serverRssAfterMb: 100,
        treeRssAfterMb,
        results,
      } as BenchResult).map((v) => [v.target, v.met]),
    );
  expect(judge(320, row('app attest assertion, sessionless', 0.4, 0.35))).toEqual({
    'App Attest assertion, sessionless': true,
    'App Attest assertion, CPU per answer (attest and its database)': true,
    'verify with a result-token key vs without': null,
    'assertion with statistics vs without (ATTEST_STATS=off)': null,
    'RSS after the whole run (attest and its database)': true,
  });
  expect(judge(321, row('app attest assertion, sessionless', 0.399, 0.351))).toEqual({
    'App Attest assertion, sessionless': false,
    'App Attest assertion, CPU per answer (attest and its database)': false,
    'verify with a result-token key vs without': null,
    'assertion with statistics vs without (ATTEST_STATS=off)': null,
    'RSS after the whole run (attest and its database)': false,
  });
});
