// `npm run bench:http [-- options]`: see docs/benchmark.md. Writes bench/results/http-<db>.json and .svg.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { runHttpBench } from './harness.js';
import { findWrk } from './wrk.js';
import { readmeSection, svgChart, table, verdicts, verdictTable } from './report.js';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '5' },
    connections: { type: 'string', default: '1,16,64' },
    registrations: { type: 'string', default: '2000' },
    warmup: { type: 'string', default: '1' },
    settle: { type: 'string', default: '15' },
    out: { type: 'string' },
    only: { type: 'string' },
    'cpu-prof': { type: 'boolean', default: false },
    // the statistics twins' order: alternate it between rounds to see any order effect
    'stats-off-first': { type: 'boolean', default: false },
    'server-node-args': { type: 'string' },
    // also `serve --workers N`, its assertion scenario beside the one process's
    workers: { type: 'string' },
    // wrk when it is installed (a C load generator leaves the cores to the server); autocannon else
    driver: { type: 'string' },
  },
});
const RESULTS = join(dirname(fileURLToPath(import.meta.url)), '..', 'results');
const out = values.out ?? RESULTS;
const databaseUrl = process.env.DATABASE_URL || undefined;
const connections = values.connections.split(',').map(Number);
if (connections.some((c) => !Number.isInteger(c) || c < 1)) {
  console.error('--connections must be a comma-separated list of whole numbers, e.g. 1,16,64');
  process.exit(2);
}
const workers = values.workers === undefined ? undefined : Number(values.workers);
if (workers !== undefined && (!Number.isInteger(workers) || workers < 2)) {
  console.error('--workers must be a whole number from 2 (the one-process server always runs)');
  process.exit(2);
}
if (values.driver !== undefined && values.driver !== 'wrk' && values.driver !== 'autocannon') {
  console.error('--driver must be wrk or autocannon');
  process.exit(2);
}
const wrk = values.driver === 'autocannon' ? undefined : findWrk();
if (values.driver === 'wrk' && !wrk) {
  console.error('--driver wrk: wrk is not installed (apt-get install wrk)');
  process.exit(2);
}
console.error(
  `load generator: ${wrk ? `wrk (${wrk}); the session pair with autocannon` : 'autocannon'}`,
);
mkdirSync(out, { recursive: true });
// PostgreSQL keeps its sealed secrets between runs: keep the master key that sealed them beside the results
let masterKey = process.env.ATTEST_MASTER_KEY || undefined;
if (!masterKey && process.env.ATTEST_MASTER_KEY_FILE)
  masterKey = readFileSync(process.env.ATTEST_MASTER_KEY_FILE, 'utf8').trim();
if (!masterKey && databaseUrl) {
  mkdirSync(RESULTS, { recursive: true });
  const file = join(RESULTS, 'bench-master.key');
  if (!existsSync(file))
    writeFileSync(file, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });
  masterKey = readFileSync(file, 'utf8').trim();
}
const result = await runHttpBench({
  connections,
  seconds: Number(values.seconds),
  registrations: Number(values.registrations),
  warmupSeconds: Number(values.warmup),
  settleSeconds: Number(values.settle),
  ...(masterKey ? { masterKey } : {}),
  ...(values.only ? { only: values.only.split(',') } : {}),
  ...(databaseUrl ? { databaseUrl } : {}),
  statsOffFirst: values['stats-off-first'],
  ...(workers !== undefined ? { workers } : {}),
  ...(wrk ? { wrk } : {}),
  serverNodeArgs: [
    ...(values['cpu-prof'] ? ['--cpu-prof', '--cpu-prof-dir', join(out, 'profiles')] : []),
    ...(values['server-node-args']?.split(' ').filter(Boolean) ?? []),
  ],
  log: (line) => console.error(line),
});
console.log(table(result));
const judged = verdicts(result);
console.log(`\n${verdictTable(judged)}`);
const base = join(out, `http-${result.database}`);
writeFileSync(`${base}.json`, `${JSON.stringify({ ...result, verdicts: judged }, null, 2)}\n`);
writeFileSync(`${base}.svg`, `${svgChart(result)}\n`);
writeFileSync(`${base}.md`, `${readmeSection(result)}\n`);
console.log(`\nwrote ${base}.json, .svg and .md (the README's "Measured costs")`);
const failed = result.results.filter(
  (r) =>
    r.wrong > 0 ||
    r.errors > 0 ||
    r.correct === 0 ||
    (r.helloRuns && Math.min(...r.helloRuns) === 0),
);
const refused = (answer: string) => answer === 'not run' || answer.includes('"isValid":false');
const replayOk =
  refused(result.replay.assertion) &&
  refused(result.replay.registration) &&
  (result.replay.consume === 'not run' || result.replay.consume.includes('"alreadyConsumed":true'));
if (failed.length || !replayOk) {
  console.error(
    `some answers were wrong: ${failed.map((r) => `${r.scenario} c=${r.connections} ${r.sampleWrong ?? ''}`).join('; ')}${replayOk ? '' : '; a replay was accepted'}`,
  );
  process.exitCode = 1;
}
