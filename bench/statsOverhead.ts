// What counting a verify for `attest stats` costs on the request's path, in process: the same
// app with and without a statistics recorder (a verify that answers at once, no database),
// alternated rounds. `npx tsx bench/statsOverhead.ts`. Over HTTP: the twin rows of bench:http.
import pino from 'pino';
import { createApp } from '../src/server/app.js';
import { createMetrics } from '../src/server/metrics.js';
import { createStatsRecorder } from '../src/server/statsRecorder.js';

const outcome = {
  ok: true,
  details: { service: 'apple', appleTokenDetails: { appId: 'ABCDE12345.com.example.bank' } },
  checks: [],
  facts: { service: 'apple', appId: 'ABCDE12345.com.example.bank' },
} as never;
function make(stats: boolean) {
  return createApp({
    logger: pino({ level: 'silent' }),
    auth: {
      authenticate: async () => ({ ok: true, keyId: 'key0000000000001', mode: 'live' }),
    } as never,
    sessions: {} as never,
    verify: async () => outcome,
    metrics: createMetrics(),
    ready: async () => true,
    sessionTtlSeconds: 300,
    ...(stats
      ? { stats: createStatsRecorder({ write: async () => {}, retentionSeconds: 3600 }) }
      : {}),
    allowlisted: () => true,
  });
}
const on = make(true),
  off = make(false);
const body = JSON.stringify({
  attestationToken: 'AAAA',
  expectedNonce: Buffer.alloc(32, 1).toString('base64'),
});
const req = () => ({
  method: 'POST',
  headers: { 'X-Api-Key': 'x', 'Content-Type': 'application/json' },
  body,
});
async function run(app: typeof on, n: number) {
  const t = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    const r = await app.request('/api/v1/attestation/verify', req());
    if (r.status !== 200) throw new Error(String(r.status));
    await r.text();
  }
  return Number(process.hrtime.bigint() - t) / n / 1000;
}
await run(on, 5000);
await run(off, 5000);
const a: number[] = [],
  b: number[] = [];
for (let round = 0; round < 30; round++) {
  if (round % 2) {
    a.push(await run(on, 2000));
    b.push(await run(off, 2000));
  } else {
    b.push(await run(off, 2000));
    a.push(await run(on, 2000));
  }
}
const med = (x: number[]) => [...x].sort((p, q) => p - q)[x.length >> 1]!;
console.log(
  `per request, median of 30 alternated rounds of 2000: statistics on ${med(a).toFixed(2)} us, off ${med(b).toFixed(2)} us (on/off ${((med(a) / med(b)) * 100).toFixed(1)}%)`,
);
const min = (x: number[]) => Math.min(...x);
console.log(
  `fastest round: on ${min(a).toFixed(2)} us, off ${min(b).toFixed(2)} us (${((min(a) / min(b)) * 100).toFixed(1)}%)`,
);
console.log('on', a.map((x) => x.toFixed(1)).join(' '));
console.log('off', b.map((x) => x.toFixed(1)).join(' '));
