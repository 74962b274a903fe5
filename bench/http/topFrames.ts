// Top frames by self time of a V8 .cpuprofile (node --cpu-prof): `tsx bench/http/topFrames.ts FILE [n=25]`.
import { readFileSync } from 'node:fs';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
const [file, n = '25'] = process.argv.slice(2);
if (!file) {
  console.error('usage: tsx bench/http/topFrames.ts PROFILE.cpuprofile [count]');
  process.exit(2);
}
const profile = JSON.parse(readFileSync(file, 'utf8')) as {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
};
const byId = new Map(profile.nodes.map((node) => [node.id, node]));
const self = new Map<string, number>();
let total = 0;
profile.samples.forEach((id, i) => {
  const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
  const short = url
    .replace(/^.*\/node_modules\//, '')
    .replace(/^.*\/(dist|src)\//, '$1/')
    .replace(/^file:\/\//, '');
  const key =
    `${functionName || '(anonymous)'} ${short ? `${short}:${lineNumber + 1}` : ''}`.trim();
  const dt = profile.timeDeltas[i] ?? 0;
  self.set(key, (self.get(key) ?? 0) + dt);
  total += dt;
});
const rows = [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, Number(n));
for (const [key, us] of rows)
  console.log(
    `${((us / total) * 100).toFixed(1).padStart(5)}%  ${(us / 1000).toFixed(0).padStart(6)} ms  ${key}`,
  );
