/**
 * The built binary (bin/attest.js) in real processes: real exit codes, real stderr, and the
 * moments lines appear, for tests of start-up, shutdown and failure paths.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

export const ROOT = join(import.meta.dirname, '..', '..');
export const BIN = join(ROOT, 'bin', 'attest.js');

function newest(dir: string): number {
  let max = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    max = Math.max(max, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs);
  }
  return max;
}

/** Builds dist/ unless it is newer than src/. */
export function buildOnce(): void {
  const built = join(ROOT, 'dist', 'cli', 'main.js');
  if (existsSync(built) && statSync(built).mtimeMs >= newest(join(ROOT, 'src'))) return;
  // tsc emits even when a file elsewhere has a type error; what matters here is that it emitted
  spawnSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(ROOT, 'tsconfig.build.json')], { stdio: 'ignore' });
  if (!existsSync(built)) throw new Error('the build did not produce dist/cli/main.js');
}

export interface BinResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** A minimal environment: nothing from the test runner's own configuration leaks in. */
export function baseEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, HOME: process.env.HOME, LOG_LEVEL: 'warn', ...extra };
}

/** Runs the binary to its end. */
export function runBin(args: string[], env: NodeJS.ProcessEnv, cwd = ROOT): Promise<BinResult> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

export interface Watched {
  child: ChildProcess;
  /** stderr so far */
  stderr(): string;
  /** resolves with the first stderr match of `pattern` and when it came (performance.now()) */
  line(pattern: RegExp): Promise<{ match: RegExpExecArray; at: number }>;
  /** the exit code and when it came */
  exited: Promise<{ code: number | null; at: number }>;
}

/** Starts the binary and watches its stderr line by line. */
export function watchBin(args: string[], env: NodeJS.ProcessEnv, cwd = ROOT): Watched {
  const child = spawn(process.execPath, [BIN, ...args], { env, cwd, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  const waiters: { pattern: RegExp; resolve: (v: { match: RegExpExecArray; at: number }) => void }[] = [];
  const check = () => {
    for (const w of [...waiters]) {
      const match = w.pattern.exec(stderr);
      if (match) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve({ match, at: performance.now() });
      }
    }
  };
  child.stderr!.on('data', (d) => {
    stderr += d;
    check();
  });
  const exited = new Promise<{ code: number | null; at: number }>((resolve) => child.on('exit', (code) => resolve({ code, at: performance.now() })));
  return {
    child,
    stderr: () => stderr,
    line: (pattern) =>
      new Promise((resolve, reject) => {
        waiters.push({ pattern, resolve });
        check();
        // 'close' comes after the last stderr chunk: a line that came at all has been seen by then
        child.once('close', (code) => reject(new Error(`exited ${code} before ${pattern}: ${stderr}`)));
      }),
    exited,
  };
}

/** Stops a watched process (SIGTERM) and waits for it. */
export async function stopBin(w: Watched): Promise<void> {
  if (w.child.exitCode === null && w.child.signalCode === null) {
    w.child.kill('SIGTERM');
    await w.exited;
  }
}
