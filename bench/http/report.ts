/**
 * The benchmark's outputs: a terminal table, the verdict on each target of the performance round
 * (met / missed), and an SVG bar chart of throughput per scenario.
 */
import type { BenchResult } from './harness.js';

/** One target of docs/benchmark-http.md, judged on a run. */
export interface Verdict {
  target: string;
  goal: string;
  measured: string;
  /** null: the run did not include what the target needs */
  met: boolean | null;
}

/** The concurrency the targets are stated at. */
export const TARGET_CONNECTIONS = 64;

/**
 * Each target of the fourth performance round (issue 49), judged on `result` at 64 connections:
 * the assertion's share of the same run's hello-world, its CPU per answer (embedded: attest's and
 * its database's processes together) and p99, the registration's share, `--workers 2` against
 * one process (throughput, and CPU per answer within 10%), the RSS after the run (embedded: the
 * tree's); and the two standing costs, statistics and result tokens, each against the same
 * verify without.
 */
export function verdicts(result: BenchResult, connections = TARGET_CONNECTIONS): Verdict[] {
  const at = result.results.filter((r) => r.connections === connections);
  const find = (name: string) => at.find((r) => r.scenario === name);
  const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
  const ms = (x: number) => `${x.toFixed(2)} ms`;
  const out: Verdict[] = [];
  const judge = (target: string, goal: string, measured: string | undefined, met?: boolean) =>
    out.push({ target, goal, measured: measured ?? 'not run', met: met ?? null });
  const ratio = (target: string, name: string, min: number) => {
    const r = find(name);
    judge(target, `>= ${pct(min)}`, r && pct(r.ratio), r && r.ratio >= min);
  };
  const embedded = result.database === 'embedded';
  const assertion = find('app attest assertion, sessionless');
  ratio(
    'App Attest assertion, sessionless',
    'app attest assertion, sessionless',
    embedded ? 0.4 : 0.45,
  );
  const cpu = embedded ? assertion?.treeCpuMsPerRequest : assertion?.cpuMsPerRequest;
  const cpuGoal = embedded ? 0.35 : 0.25;
  judge(
    embedded
      ? 'App Attest assertion, CPU per answer (attest and its database)'
      : 'App Attest assertion, CPU per answer',
    `<= ${cpuGoal} ms`,
    cpu === undefined ? undefined : ms(cpu),
    cpu === undefined ? undefined : cpu <= cpuGoal,
  );
  if (!embedded) {
    judge(
      'App Attest assertion, p99',
      '<= 50 ms',
      assertion && `${assertion.p99} ms`,
      assertion && assertion.p99 <= 50,
    );
    ratio('App Attest registration', 'app attest registration', 0.12);
    const many = at.find((r) =>
      /^app attest assertion, sessionless, \d+ workers$/.test(r.scenario),
    );
    const both = assertion && many ? { one: assertion, many } : undefined;
    judge(
      'App Attest assertion, --workers 2 vs one process',
      '>= 1.50x its throughput',
      both && `${(both.many.rps / both.one.rps).toFixed(2)}x (${both.many.scenario})`,
      both && both.many.rps / both.one.rps >= 1.5,
    );
    judge(
      'the same, CPU per answer vs one process',
      'within 10%',
      both && `${ms(both.many.cpuMsPerRequest)} vs ${ms(both.one.cpuMsPerRequest)}`,
      both && both.many.cpuMsPerRequest <= both.one.cpuMsPerRequest * 1.1,
    );
  }
  const plain = find('play integrity, sessionless');
  const signed = find('play integrity, sessionless, result token');
  judge(
    'verify with a result-token key vs without',
    '>= 90.0% of its throughput',
    plain && signed && pct(signed.rps / plain.rps),
    plain && signed && signed.rps / plain.rps >= 0.9,
  );
  const counted = find('app attest assertion, sessionless, twin, statistics on');
  const uncounted = find('app attest assertion, sessionless, twin, statistics off');
  judge(
    'assertion with statistics vs without (ATTEST_STATS=off)',
    '>= 95.0% of its throughput',
    counted && uncounted && pct(counted.rps / uncounted.rps),
    counted && uncounted && counted.rps / uncounted.rps >= 0.95,
  );
  const rss = embedded ? result.treeRssAfterMb : result.serverRssAfterMb;
  const rssGoal = embedded ? 320 : 160;
  const idle = embedded ? result.treeRssSettledMb : result.serverRssSettledMb;
  judge(
    embedded
      ? 'RSS after the whole run (attest and its database)'
      : 'server RSS after the whole run',
    `<= ${rssGoal} MB`,
    rss === undefined || !Number.isFinite(rss)
      ? undefined
      : `${rss.toFixed(0)} MB${idle == null ? '' : ` (${idle.toFixed(0)} MB once idle)`}`,
    rss === undefined || !Number.isFinite(rss) ? undefined : rss <= rssGoal,
  );
  return out;
}

/** The verdicts as a Markdown table. */
export function verdictTable(list: readonly Verdict[], connections = TARGET_CONNECTIONS): string {
  return [
    `| target (${connections} connections) | goal | measured | verdict |`,
    '|---|---|---|---|',
    ...list.map(
      (v) =>
        `| ${v.target} | ${v.goal} | ${v.measured} | ${v.met === null ? 'not run' : v.met ? 'met' : 'missed'} |`,
    ),
  ].join('\n');
}

export function table(result: BenchResult): string {
  const head =
    '| scenario | conns | req/s | vs hello | p50 ms | p99 ms | CPU ms/req | +database | loop delay p99 ms | GC pauses | correct | wrong | errors | driver |';
  const rule = '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|';
  const rows = result.results.map(
    (r) =>
      `| ${r.scenario}${r.helloRuns ? ' (better of 2)' : ''} | ${r.connections} | ${r.rps.toFixed(0)} | ${(r.ratio * 100).toFixed(1)}% | ${r.p50} | ${r.p99} | ${r.cpuMsPerRequest.toFixed(3)} | ${r.treeCpuMsPerRequest === undefined ? '-' : r.treeCpuMsPerRequest.toFixed(3)} | ${r.server ? r.server.loopDelayP99Ms.toFixed(1) : '-'} | ${r.server ? `${r.server.gcCount} / ${r.server.gcMs.toFixed(0)} ms` : '-'} | ${r.correct} | ${r.wrong} | ${r.errors} | ${r.driver ?? '-'} |`,
  );
  return [
    `database ${result.database}, node ${result.node}, load before ${result.loadBefore.join(' ')} / after ${result.loadAfter.join(' ')}`,
    head,
    rule,
    ...rows,
    '',
    `hello-world runs before / after the scenarios: ${result.results
      .filter((r) => r.helloRuns)
      .map((r) => `c=${r.connections} ${r.helloRuns!.map((x) => x.toFixed(0)).join(' / ')}`)
      .join(', ')} req/s; ratios are to the better run`,
    `server RSS after the run ${result.serverRssAfterMb.toFixed(0)} MB${settled(result)}${tree(result)} (peak ${result.serverPeakRssMb.toFixed(0)} MB); JS heap ${result.serverHeapMb.heapUsed.toFixed(0)} MB used of ${result.serverHeapMb.heapTotal.toFixed(0)} MB, external ${result.serverHeapMb.external.toFixed(0)} MB`,
    `replayed assertion: ${result.replay.assertion}`,
    `replayed registration: ${result.replay.registration}`,
    `consumed result token, consumed again: ${result.replay.consume}`,
  ].join('\n');
}

const tree = (r: BenchResult) =>
  r.treeRssAfterMb === undefined
    ? ''
    : `; with its database's processes (Pss: shared pages once) ${r.treeRssAfterMb.toFixed(0)} MB${r.treeRssSettledMb == null ? '' : `, ${r.treeRssSettledMb.toFixed(0)} MB once idle`}`;
const settled = (r: BenchResult) =>
  r.serverRssSettledMb == null ? '' : `, ${r.serverRssSettledMb.toFixed(0)} MB once idle`;

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** Grouped horizontal bars: one group per scenario, one bar per concurrency. */
export function svgChart(result: BenchResult): string {
  const scenarios = [...new Set(result.results.map((r) => r.scenario))];
  const conns = [...new Set(result.results.map((r) => r.connections))];
  const colours = ['#9ecae1', '#4292c6', '#08519c', '#08306b'];
  const max = Math.max(...result.results.map((r) => r.rps), 1);
  const barH = 14;
  const groupH = conns.length * barH + 14;
  const left = 250;
  const width = 900;
  const plot = width - left - 120;
  const top = 40;
  const height = top + scenarios.length * groupH + 30;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="10" y="20" font-size="14">${esc(`attest HTTP throughput (req/s), ${result.database} database, ${result.startedAt.slice(0, 16)}Z, load ${result.loadBefore[0] ?? '?'}`)}</text>`,
  ];
  conns.forEach((c, i) => {
    out.push(
      `<rect x="${left + i * 110}" y="26" width="10" height="10" fill="${colours[i % colours.length]}"/><text x="${left + i * 110 + 14}" y="35">${c} connection${c === 1 ? '' : 's'}</text>`,
    );
  });
  scenarios.forEach((s, gi) => {
    const y0 = top + gi * groupH + 6;
    out.push(
      `<text x="${left - 8}" y="${y0 + (conns.length * barH) / 2 + 4}" text-anchor="end">${esc(s)}</text>`,
    );
    conns.forEach((c, i) => {
      const r = result.results.find((x) => x.scenario === s && x.connections === c);
      if (!r) return;
      const w = Math.max(1, (r.rps / max) * plot);
      const y = y0 + i * barH;
      out.push(
        `<rect x="${left}" y="${y}" width="${w.toFixed(1)}" height="${barH - 2}" fill="${colours[i % colours.length]}"/>`,
      );
      out.push(
        `<text x="${(left + w + 4).toFixed(1)}" y="${y + barH - 4}">${r.rps.toFixed(0)}${s === 'hello-world' ? '' : ` (${(r.ratio * 100).toFixed(0)}%)`}</text>`,
      );
    });
  });
  out.push('</svg>');
  return out.join('\n');
}

const LABELS: Record<string, string> = {
  'hello-world': 'hello-world (yardstick)',
  init: '`init`',
  'play integrity, sessionless': 'Play Integrity verify, sessionless',
  'play integrity, sessionless, result token': 'the same, API key with result tokens',
  'app attest assertion, sessionless': 'App Attest assertion verify, sessionless',
  'app attest registration': 'App Attest registration (each key once)',
  'android-key assertion, sessionless': 'android-key assertion verify, sessionless',
  'android-key registration': 'android-key registration (each key once)',
  'garbage token': 'garbage token (rejected)',
  'result token consume': 'result token consume (each token once)',
  'session: init + verify': 'session approach (`init` + `verify`, per pair)',
};

/**
 * The README's "Measured costs" from one run: every scenario at 64 connections, the verdict on
 * each target, and the server's memory (written beside the JSON as http-<db>.md).
 */
export function readmeSection(result: BenchResult, connections = TARGET_CONNECTIONS): string {
  const n = (x: number) => Math.round(x).toLocaleString('en-US').replace(/,/g, ' ');
  const rows = result.results
    .filter((r) => r.connections === connections)
    .map(
      (r) =>
        `| ${LABELS[r.scenario] ?? r.scenario} | ${(r.ratio * 100).toFixed(1)}% | ${n(r.rps)} | ${r.p50} ms | ${r.p99} ms | ${r.cpuMsPerRequest.toFixed(2)} ms | ${r.server ? `${r.server.loopDelayP99Ms.toFixed(1)} ms` : '-'} |`,
    );
  const hello = result.results.find((r) => r.target === 'hello' && r.connections === connections);
  return [
    `${result.database === 'postgres' ? 'PostgreSQL' : 'Embedded (the owned PostgreSQL 18 server)'}, ${connections} connections, ${result.startedAt.slice(0, 10)}, Node ${result.node}, load average ${result.loadBefore[0] ?? '?'} before / ${result.loadAfter[0] ?? '?'} after; yardstick runs ${hello?.helloRuns?.map(n).join(' / ') ?? '?'} req/s (the better counts).`,
    '',
    '| scenario | vs hello-world | req/s | p50 | p99 | server CPU per answer | event-loop delay p99 |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...rows,
    '',
    verdictTable(verdicts(result, connections), connections),
    '',
    `Server RSS after the run ${result.serverRssAfterMb.toFixed(0)} MB${settled(result)} (peak ${result.serverPeakRssMb.toFixed(0)} MB); JS heap ${result.serverHeapMb.heapUsed.toFixed(0)} MB used of ${result.serverHeapMb.heapTotal.toFixed(0)} MB, external ${result.serverHeapMb.external.toFixed(0)} MB.`,
  ].join('\n');
}
