import { readFileSync } from 'node:fs';
const prof = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const self = new Map();
const byId = new Map(prof.nodes.map((n) => [n.id, n]));
// the profile is the whole process's: start-up (module loading and compiling) is left out, so the
// shares are those of the work the run measured
const parent = new Map();
for (const n of prof.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const loading = (id) => {
  for (let at = id; at !== undefined; at = parent.get(at))
    if (byId.get(at).callFrame.url.startsWith('node:internal/modules')) return true;
  return false;
};
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
  if (!g || loading(id)) continue;
  total += t;
  self.set(g, (self.get(g) ?? 0) + t);
}
for (const [g, t] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 25))
  console.log(((100 * t) / total).toFixed(1).padStart(5) + '%  ' + g);
// and the top functions (self time), where a group is too coarse to act on
if (process.argv[3] === '--functions') {
  const fns = new Map();
  for (const [id, t] of dt) {
    const n = byId.get(id);
    if (n.callFrame.functionName === '(idle)' || loading(id)) continue;
    const u = n.callFrame.url.replace(/^.*node_modules\//, '').replace(/^.*\/dist\//, 'dist/');
    const k = `${n.callFrame.functionName || '(anonymous)'} ${u}:${n.callFrame.lineNumber + 1}`;
    fns.set(k, (fns.get(k) ?? 0) + t);
  }
  console.log('top functions:');
  for (const [k, t] of [...fns].sort((a, b) => b[1] - a[1]).slice(0, 25))
    console.log(((100 * t) / total).toFixed(1).padStart(5) + '%  ' + k);
}
console.log('busy ms', (total / 1000).toFixed(0));
