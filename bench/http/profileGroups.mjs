import { readFileSync } from 'node:fs';
const prof = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const self = new Map();
const byId = new Map(prof.nodes.map((n) => [n.id, n]));
const dt = new Map();
for (let i = 0; i < prof.samples.length; i++)
  dt.set(prof.samples[i], (dt.get(prof.samples[i]) ?? 0) + (prof.timeDeltas[i] ?? 0));
const group = (n) => {
  const u = n.callFrame.url,
    f = n.callFrame.functionName;
  if (f === '(idle)') return null;
  if (f === '(garbage collector)') return 'GC';
  if (f === '(program)') return 'V8 (program)';
  if (!u)
    return /^(writev|writeBuffer|writeString|writeUtf8String)$/.test(f)
      ? 'socket writes (native)'
      : /verifyOneShot|sign|digest/i.test(f)
        ? 'crypto (native)'
        : 'native: ' + f;
  let m = u.match(/node_modules\/((?:@[^/]+\/)?[^/]+)/);
  if (m) return 'pkg ' + m[1];
  m = u.match(/dist\/(core|server|db|google|apple|admin)\//);
  if (m) return 'attest ' + m[1];
  if (u.startsWith('node:internal/crypto')) return 'node crypto';
  if (u.startsWith('node:internal/async_hooks') || u === 'node:async_hooks')
    return 'node async_hooks (AsyncLocalStorage)';
  if (/node:(internal\/)?(http|_http|net|stream|internal\/streams)/.test(u))
    return 'node http/net/streams';
  if (u.startsWith('node:')) return 'node other';
  return u;
};
let total = 0;
for (const [id, t] of dt) {
  const g = group(byId.get(id));
  if (!g) continue;
  total += t;
  self.set(g, (self.get(g) ?? 0) + t);
}
for (const [g, t] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 25))
  console.log(((100 * t) / total).toFixed(1).padStart(5) + '%  ' + g);
console.log('busy ms', (total / 1000).toFixed(0));
