#!/usr/bin/env node
// Replays the Dockerfile where no Docker engine runs (this CI machine has only the client): the
// build stage's COPY and RUN steps in a scratch /app, then every path the final stage copies from
// it must exist, and the final stage's /app, assembled from those paths alone, must start
// `attest serve` on its embedded database and answer /readyz. A Dockerfile whose build stage
// fails, or whose final stage copies what the build never made (dist/ before it was built), fails
// here as it would under `docker build`. RUN steps that install system packages (apt-get) are
// skipped: the machine has them. Where `docker info` answers, .ci/run builds the real image.
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';

const context = resolve(import.meta.dirname, '..', '..');
const lines = readFileSync(join(context, 'Dockerfile'), 'utf8')
  .replace(/\\\n/g, ' ')
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l && !l.startsWith('#'));

/** @type {{ name: string | undefined, steps: { op: string, args: string }[] }[]} */
const stages = [];
for (const line of lines) {
  const [, op, args] = /^(\S+)\s+(.*)$/.exec(line) ?? [];
  if (!op) continue;
  if (op.toUpperCase() === 'FROM') {
    stages.push({ name: /\sAS\s+(\S+)$/i.exec(args)?.[1], steps: [] });
    continue;
  }
  stages.at(-1)?.steps.push({ op: op.toUpperCase(), args });
}
const build = stages.find((s) => s.name === 'build');
const final = stages.at(-1);
if (!build || !final || build === final) fail('the Dockerfile has no build stage and final stage');

const scratch = mkdtempSync(join(tmpdir(), 'attest-dockerfile-'));
const cleanup = () => rmSync(scratch, { recursive: true, force: true });
process.on('exit', cleanup);

function fail(message) {
  console.error(`replayDockerfile: ${message}`);
  process.exit(1);
}

/** a stage's filesystem under `root`: image paths map below it */
function inStage(root, workdir, path) {
  return join(root, path.startsWith('/') ? path : join(workdir, path));
}

function copy(from, to) {
  if (!existsSync(from)) fail(`COPY: ${from} does not exist`);
  mkdirSync(dirname(to), { recursive: true });
  cpSync(from, to, { recursive: true, verbatimSymlinks: true });
}

/** COPY [--from=stage] src... dest, as Docker reads it (dest/ or several sources: into a folder) */
function copyStep(args, sourceRoot, root, workdir) {
  const words = args.split(/\s+/);
  const from = words[0].startsWith('--from=') ? words.shift().slice('--from='.length) : undefined;
  const dest = words.pop();
  const intoFolder = dest.endsWith('/') || words.length > 1;
  for (const src of words) {
    const source = from ? join(sourceRoot, src) : join(context, src);
    const target = inStage(root, workdir, intoFolder ? join(dest, src.split('/').pop()) : dest);
    copy(source, target);
  }
  return from;
}

// the build stage
const buildRoot = join(scratch, 'build');
let workdir = '/';
for (const { op, args } of build.steps) {
  if (op === 'WORKDIR') {
    workdir = args;
    mkdirSync(inStage(buildRoot, '/', workdir), { recursive: true });
  } else if (op === 'COPY') {
    copyStep(args, context, buildRoot, workdir);
  } else if (op === 'RUN') {
    if (/^apt-get\b/.test(args)) {
      console.log(`replayDockerfile: skipped (system packages): RUN ${args.slice(0, 60)}…`);
      continue;
    }
    console.log(`replayDockerfile: RUN ${args}`);
    try {
      execFileSync('/bin/sh', ['-c', args], {
        cwd: inStage(buildRoot, '/', workdir),
        stdio: ['ignore', 'ignore', 'inherit'],
        env: { PATH: process.env.PATH, HOME: process.env.HOME ?? scratch },
      });
    } catch {
      fail(`the build stage's RUN ${args} failed`);
    }
  }
}

// the final stage: only what it copies from the build stage
const finalRoot = join(scratch, 'final');
workdir = '/';
let env = {};
const copied = [];
for (const { op, args } of final.steps) {
  if (op === 'WORKDIR') workdir = args;
  else if (op === 'ENV')
    env = {
      ...env,
      ...Object.fromEntries([...args.matchAll(/(\w+)=(\S+)/g)].map((m) => [m[1], m[2]])),
    };
  else if (op === 'COPY') {
    const from = args.split(/\s+/)[0];
    if (from !== '--from=build') fail(`the final stage copies from outside the build: ${args}`);
    copyStep(args, buildRoot, finalRoot, workdir);
    copied.push(args.split(/\s+/)[1]);
  }
}
console.log(`replayDockerfile: the final stage has ${copied.join(', ')}`);

// the assembled image starts on its embedded database and answers
const app = inStage(finalRoot, '/', workdir);
const version = execFileSync(process.execPath, [join(app, 'bin', 'attest.js'), '--version'], {
  encoding: 'utf8',
}).trim();
const dataDir = join(scratch, 'data');
mkdirSync(dataDir, { mode: 0o700 });
const server = spawn(
  process.execPath,
  [join(app, 'bin', 'attest.js'), 'serve', '--port', '0', '--host', '127.0.0.1'],
  {
    cwd: app,
    env: {
      PATH: process.env.PATH,
      HOME: scratch,
      ...env,
      ATTEST_DATA_DIR: dataDir,
      ATTEST_ANDROID_REVOCATION_URL: 'off',
      LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  },
);
let stderr = '';
const url = await new Promise((resolveUrl) => {
  const timer = setTimeout(() => resolveUrl(undefined), 120_000);
  server.stderr.on('data', (d) => {
    stderr += d;
    const m = /attest listening on (http:\/\/\S+)/.exec(stderr);
    if (m) {
      clearTimeout(timer);
      resolveUrl(m[1]);
    }
  });
  server.once('exit', () => resolveUrl(undefined));
});
if (!url) {
  server.kill('SIGKILL');
  fail(`the final stage's attest serve did not start: ${stderr.trim()}`);
}
const ready = await fetch(`${url}/readyz`).then((r) => r.status);
server.kill('SIGTERM');
const code = await new Promise((r) => server.once('exit', (c) => r(c)));
if (ready !== 200) fail(`/readyz answered ${ready}`);
if (code !== 0) fail(`SIGTERM ended serve with exit ${code}: ${stderr.trim()}`);
console.log(
  `replayDockerfile: the image's build replayed; attest ${version} from its final stage served /readyz 200 and stopped cleanly`,
);
