// Init throughput over HTTP against a running `attest serve` (bounded: loopback only, fixed duration).
// Usage: node bench/httpLoad.mjs URL API_KEY [seconds=10] [concurrency=32]
const [url, key, seconds = '10', concurrency = '32'] = process.argv.slice(2);
if (!url || !key) {
  console.error(
    'usage: node bench/httpLoad.mjs http://127.0.0.1:8080 attest_... [seconds] [concurrency]',
  );
  process.exit(2);
}
const target = new URL('/api/v1/attestation/init', url);
if (!['127.0.0.1', 'localhost', '[::1]'].includes(target.hostname)) {
  console.error('refusing a non-loopback target');
  process.exit(2);
}
const until = performance.now() + Number(seconds) * 1000;
const latencies = [];
const statuses = new Map();
async function worker() {
  while (performance.now() < until) {
    const started = performance.now();
    const res = await fetch(target, { method: 'POST', headers: { 'X-Api-Key': key } });
    await res.arrayBuffer();
    latencies.push(performance.now() - started);
    statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
  }
}
await Promise.all(Array.from({ length: Number(concurrency) }, worker));
latencies.sort((a, b) => a - b);
const q = (p) =>
  latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))].toFixed(1);
console.log(
  `${latencies.length} requests in ${seconds} s: ${(latencies.length / Number(seconds)).toFixed(0)}/s, ` +
    `p50 ${q(0.5)} ms, p99 ${q(0.99)} ms, statuses ${JSON.stringify(Object.fromEntries(statuses))}`,
);
