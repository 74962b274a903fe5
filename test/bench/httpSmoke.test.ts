/**
 * The HTTP benchmark in miniature (embedded database, one short run per scenario): every
 * scenario ran and every answer was the expected one, and the replays are refused. Its numbers
 * are not looked at: this only keeps `npm run bench:http` working.
 */
import { beforeAll, expect, it } from 'vitest';
import { runHttpBench } from '../../bench/http/harness.js';
import { svgChart, table } from '../../bench/http/report.js';
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
  });
  expect(result.results.map((r) => r.scenario)).toEqual([
    'hello-world',
    'init',
    'play integrity, sessionless',
    'play integrity, sessionless, result token',
    'app attest assertion, sessionless',
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
  }
  expect(result.results.find((r) => r.scenario === 'app attest registration')!.correct).toBe(6);
  // the used assertion and registration, sent again, are refused: the counter and the key were stored
  expect(result.replay.assertion).toBe('200 {"isValid":false,"statusCode":0}');
  expect(result.replay.registration).toBe('200 {"isValid":false,"statusCode":0}');
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
